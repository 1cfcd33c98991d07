// A TypeScript app adopting the package: every option, event and frame type in use, under
// `tsc --strict` (scripts/npm-package-check.sh copies this into a scratch project that
// installed the packed tarball). Lines marked @ts-expect-error must stay errors.
import {
  AuctionClient,
  BidBook,
  FallbackPolicy,
  HeartbeatTracker,
  MAX_HERD_HINT_MS,
  backoffDelay,
  decideMove,
  dominates,
  higherBid,
  isInternalError,
  newBidId,
  TokenDenied,
  REASON_CODES,
  type AuctionClientOptions,
  type ClientFrame,
  type ServerFrame,
  type Settlement,
  TopicLog,
  type OpCopy,
  type TopicView,
} from 'wsdr-client';
import { reduce, useAuction, useTopic, useWsdr, WsdrProvider, type WsdrHook, type WsdrOptions, type WsdrState } from 'wsdr-client/react';

const options: AuctionClientOptions = {
  url: 'wss://auction.example.com',
  regions: [
    { region: 'us-east-1', url: 'wss://use1.auction.example.com' },
    { region: 'us-west-2', url: 'wss://usw2.auction.example.com' },
  ],
  auctionId: 'lot-1',
  tokenProvider: async () => 'token',
  heartbeatIntervalMs: 30000,
  heartbeatTimeoutMs: 35000,
  failureThreshold: 2,
  backoff: { baseMs: 2000, capMs: 20000, herdHint: true },
  settleWindowMs: 120000,
  timeScale: 1,
};

// The platform's WebSocket class fits the option as it is, and so does a class shaped like
// the `ws` package's (its own event types, extra constructor options).
const platform: AuctionClientOptions = { ...options, WebSocket: WebSocket, tokenPlacement: 'subprotocol' };
class WsLike {
  readyState = 0;
  constructor(_address: string | URL, _protocols?: string | string[], _options?: { headers?: Record<string, string> }) {}
  send(_data: string | Uint8Array): void {}
  close(_code?: number, _reason?: string | Uint8Array): void {}
  onopen: ((event: { target: WsLike }) => void) | null = null;
  onmessage: ((event: { data: string | Uint8Array; type: string; target: WsLike }) => void) | null = null;
  onclose: ((event: { wasClean: boolean; code: number; reason: string; target: WsLike }) => void) | null = null;
  onerror: ((event: { error: unknown; message: string; type: string; target: WsLike }) => void) | null = null;
}
const fromWs: AuctionClientOptions = { ...options, WebSocket: WsLike };
// @ts-expect-error: only the two placements exist
const misplaced: AuctionClientOptions = { ...options, tokenPlacement: 'header' };
void [platform, fromWs, misplaced];

const client = new AuctionClient(options);
client.addEventListener('status', (e) => {
  const state: 'connecting' | 'connected' | 'reconnecting' | 'closed' | 'failed' = e.detail.state;
  void state;
});
client.addEventListener('gaveUp', (e) => {
  const reason: string = e.detail.reason;
  const signIn: boolean = e.detail.code === REASON_CODES.token_denied;
  void reason, signIn;
});
client.addEventListener('bidExpired', (e) => {
  const bidId: string = e.detail.bidId;
  void bidId;
});
const signedOut: AuctionClientOptions = {
  ...options,
  maxAttempts: 10,
  tokenProvider: ({ refresh }) => {
    if (refresh) throw new TokenDenied('signed out');
    return 'token';
  },
};
void signedOut;
client.addEventListener('restored', (e) => {
  const high = e.detail.auction.highBid;
  const amount: number | undefined = high?.amount;
  const outage: number | null = e.detail.outageMs;
  const mine = e.detail.you.bids?.map((b) => b.regions.join('+'));
  void amount, outage, mine;
});
client.addEventListener('update', (e) => {
  const versions: Record<string, number> = e.detail.versions;
  void versions;
});
client.addEventListener('bidResult', (e) => {
  if (e.detail.status === 'redirect' || e.detail.doubtful) return;
  const reason: string | null = e.detail.reason;
  void reason;
});
client.addEventListener('bidSettled', (e) => {
  const settled: Settlement = e.detail;
  void settled.stands;
});
client.addEventListener('endpoint', (e) => void e.detail.regional);
client.addEventListener('moveScheduled', (e) => void e.detail.afterMs);
client.addEventListener('disconnected', (e) => void [e.detail.reason.length, e.detail.code, e.detail.closeCode]);
// @ts-expect-error: the detail of `status` has no `auction`
client.addEventListener('status', (e) => void e.detail.auction);
const bidId: string = client.bid(150000);
void client.whenConnected().then(({ region }) => region.length);
const retryingIn: number | null = client.state.retryAt === null ? null : client.state.retryAt - Date.now();
const logging: AuctionClientOptions = { ...options, log: (entry) => void [entry.type, entry.at] };
void retryingIn, logging;
// Several auctions over the one socket.
const many = new AuctionClient({ ...options, auctionId: undefined, auctionIds: ['lot-1', 'lot-2'] });
many.watch('lot-3');
const inLot2: string = many.bid(1000, 'lot-2');
const lot2 = many.state.auctions['lot-2']?.highBid?.amount;
const watchedIds: readonly string[] = many.auctionIds;
const first: string | null = many.auctionId;
void bidId, inLot2, lot2, watchedIds, first;
client.start().close();

// Any app's topic (a chat room) over the same socket: join, write, its events and view.
const chatty = new AuctionClient({ ...options, topics: ['chat:lobby'] });
chatty.join('chat:general');
const postId: string = chatty.write('chat:lobby', { text: 'hello' });
chatty.addEventListener('topicRestored', (e) => {
  const copies: OpCopy[] = e.detail.added;
  const whole: boolean = e.detail.complete;
  void copies.map((c) => `${c.log}:${c.position} ${c.author}`), whole;
});
chatty.addEventListener('discontinuity', (e) => void [e.detail.topic, e.detail.heldTo]);
chatty.addEventListener('writeResult', (e) => void [e.detail.opId, e.detail.status, e.detail.doubtful]);
chatty.addEventListener('writeSettled', (e) => void e.detail.stands);
const lobby: TopicView | undefined = chatty.state.topics?.['chat:lobby'];
const wrote = chatty.state.writes?.[postId]?.status;
const log = new TopicLog('chat:lobby');
const ask: string = log.request();
void lobby?.complete, wrote, ask;
const room: (t: string) => { topic: TopicView | null; write(op: unknown): string } = useTopic;
void room;

function handle(frame: ServerFrame): string {
  switch (frame.type) {
    case 'pong':
      return `${frame.region} ${frame.herdWindowMs ?? 0}`;
    case 'state':
      return frame.auction.id;
    case 'bidResult':
      return frame.status;
    case 'bidUpdate':
      return String(frame.version);
    case 'error':
      return frame.code;
    case 'moveTo':
      return frame.to;
  }
}
void handle;

const frames: ClientFrame[] = [
  { action: 'heartbeat', auctionId: 'lot-1' },
  { action: 'getState', auctionId: 'lot-1', bidIds: ['b-1'] },
  { action: 'bid', auctionId: 'lot-1', amount: 100, bidId: newBidId() },
];
// @ts-expect-error: a bid needs its bidId
const missing: ClientFrame = { action: 'bid', auctionId: 'lot-1', amount: 100 };
void frames, missing;

const tracker = new HeartbeatTracker({ intervalMs: 30000, timeoutMs: 35000, threshold: 2 });
const tick = tracker.onTick(30000);
if (tick.send && tick.nextInMs !== null) void tick.nextInMs;
const policy = new FallbackPolicy({ regions: options.regions ?? [] });
const decision: 'stay' | 'adopt-global' | 'return' = policy.onProbe('us-west-2', 'us-east-1');
const move = decideMove({ to: 'us-west-2', windowMs: 1000 }, { servingRegion: 'us-east-1', globalUrl: options.url });
if (move.ignored === undefined) void move.afterMs;
const delay: number = backoffDelay(0, { advertisedHerdMs: MAX_HERD_HINT_MS, throttled: true });
const book = new BidBook({ settleWindowMs: 1000 });
void decision, delay, book.stateRequest('lot-1'), dominates({ a: 1 }, null), higherBid(null, null), isInternalError({});

const hook: (o: AuctionClientOptions) => WsdrHook = useWsdr;
const next: WsdrState = reduce(
  { connection: 'connecting', region: null, auction: null, auctions: {}, you: null, outageMs: null, endpoint: null, bids: {}, lastDisconnect: null, lastDisconnectCode: null, attempt: 0, retryAt: null },
  'status',
  { state: 'connected' },
);
// Lazy connect and the shared client: `enabled`, a provider taking the same options, and
// `useWsdr()` without options reading the provider's.
const lazy: WsdrOptions = { ...options, enabled: false };
const shared: () => WsdrHook = () => useWsdr();
const oneLot: (id: string) => WsdrHook = useAuction;
const bidInLot: (h: WsdrHook) => string = (h) => h.bid(100, 'lot-2');
void oneLot, bidInLot;
const provider: unknown = WsdrProvider({ ...lazy, children: null });
const idle: WsdrState['connection'] = 'idle';
void hook, next.bids, shared, provider, idle;
