// Types for wsdr-client.js: the wire frames (docs/PROTOCOL.md), the client's options and
// events, and the pure policies the Rust client shares (conformance/*.json). Checked by
// `tsc --strict` against a consumer in a scratch project (scripts/npm-package-check.sh), which
// also fails if a value is declared here and not exported by the module, or the reverse.

// ---------------------------------------------------------------------------------------------
// Wire frames, server to client. Every frame carries `type` and the serving `region`. Fields
// added later come with defaults: treat a missing optional field as empty.

/** For each Region, how many bids it has accepted in this auction (strong mode: `global`). */
export type Versions = Record<string, number>;

export interface HighBid {
  /** Integer minor units. */
  amount: number;
  bidder: string;
  bidId: string;
  /** Milliseconds since the epoch, by the accepting Region's clock. */
  at: number;
}

export interface AuctionView {
  id: string;
  item?: string;
  highBid: HighBid | null;
  bidCount: number;
  version: number;
  versions: Versions;
  /** The auction's rules (absent from servers that predate them): the first bid must be at
   * least `startingPrice`, a later one beat the high bid by at least `minIncrement`. */
  startingPrice?: number;
  minIncrement?: number;
  /** The smallest amount the serving Region would accept when it sent this view. */
  minNextBid?: number;
}

export interface OwnBid {
  bidId: string;
  amount: number;
  at: number;
  regions: string[];
}

/** One copy of a settled bid: the Region that accepted it, and the amount it holds. */
export interface SettledCopy {
  region: string;
  amount: number;
}

/**
 * `amount` is present only when every copy has the same one; a bidId reused with two
 * amounts (one accepted in each Region during a split) has no `amount`, and `copies` names
 * each copy's own Region and amount.
 */
export type SettledAnswer =
  | { bidId: string; stands: true; amount?: number; regions: string[]; copies?: SettledCopy[] }
  | { bidId: string; stands: false };

export interface You {
  userId: string;
  lastBid: { amount: number; bidId: string; at: number } | null;
  bids?: OwnBid[];
  settled?: SettledAnswer[];
}

export interface PongFrame {
  type: 'pong';
  region: string;
  ts: number;
  herdWindowMs?: number;
  auctionId?: string;
  versions?: Versions;
}

export interface StateFrame {
  type: 'state';
  region: string;
  auction: AuctionView;
  you: You;
  herdWindowMs?: number;
}

export type BidStatus = 'accepted' | 'duplicate' | 'rejected' | 'unknown' | 'redirect';

export type BidReason =
  | 'unknown_auction'
  | 'auction_closed'
  | 'below_starting_price'
  | 'too_low'
  | 'bid_id_reused'
  | 'forbidden'
  | 'unavailable'
  | 'no_quorum';

export interface BidResultFrame {
  type: 'bidResult';
  region: string;
  bidId: string;
  status: BidStatus;
  /** Open to values added later; see docs/PROTOCOL.md. */
  reason: BidReason | (string & {}) | null;
}

export interface BidUpdateFrame {
  type: 'bidUpdate';
  region: string;
  auctionId: string;
  highBid: HighBid | null;
  bidCount: number;
  version: number;
  versions: Versions;
}

export type ErrorCode =
  | 'bad_json'
  | 'unknown_action'
  | 'invalid_field'
  | 'too_large'
  | 'unauthorized'
  | 'no_quorum'
  | 'internal';

export interface ErrorFrame {
  type: 'error';
  region: string;
  code: ErrorCode | (string & {});
  message: string;
}

export interface MoveToFrame {
  type: 'moveTo';
  region: string;
  to: string;
  endpoint?: string;
  windowMs?: number;
  afterMs?: number;
  reason?: string;
}

/** API Gateway's own answer when the integration fails: a failed heartbeat, never life. */
export interface GatewayErrorFrame {
  message: 'Internal server error';
  connectionId?: string;
  requestId?: string;
}

export type ServerFrame =
  | PongFrame
  | StateFrame
  | BidResultFrame
  | BidUpdateFrame
  | ErrorFrame
  | MoveToFrame;

// Client to server.

export type ClientFrame =
  | { action: 'heartbeat'; auctionId?: string }
  | { action: 'getState'; auctionId: string; bidIds?: string[] }
  | { action: 'bid'; auctionId: string; amount: number; bidId: string };

// ---------------------------------------------------------------------------------------------
// Pure policies (the same rules as crates/client, proved by conformance/*.json).

/** The longest advertised herd window a client honours, ms. */
export declare const MAX_HERD_HINT_MS: number;
/** The longest delay + window a moveTo may ask for, ms. */
export declare const MAX_MOVE_WINDOW_MS: number;
/** Most bidIds one getState may name. */
export declare const SETTLE_BIDS_MAX: number;

export interface BackoffOptions {
  /** First window, ms (default 2000). */
  baseMs?: number;
  /** Largest window, ms (default 20000). */
  capMs?: number;
  /** Least delay, ms (default 0). */
  floorMs?: number;
  /** The herd window a 429 widens to, ms. */
  herdWindowMs?: number;
  /** The server's herd hint, ms (the first retry draws from at least this window). */
  advertisedHerdMs?: number | null;
  /** Honour the server's herd hint (default true). */
  herdHint?: boolean;
  /** Cap on the honoured herd hint, ms (default MAX_HERD_HINT_MS). */
  maxHerdHintMs?: number;
  /** The handshake was refused for load (429). */
  throttled?: boolean;
  /** false: return the window's ceiling instead of a draw. */
  jitter?: boolean;
}

/** Full-jitter backoff: a delay in ms for retry number `attempt` (0 = the first retry). */
export declare function backoffDelay(
  attempt: number,
  options?: BackoffOptions,
  random?: () => number,
): number;

export interface HeartbeatOptions {
  intervalMs?: number;
  timeoutMs?: number;
  /** Failed rounds in a row that break the session (default 2). */
  threshold?: number;
}

/** After an error frame: whether the session is broken, and when the next (confirmation)
 * heartbeat is due, ms from now (null: keep the schedule). */
export interface ErrorFrameVerdict {
  broken: boolean;
  nextInMs: number | null;
}

/** At a heartbeat tick: broken (and why), or send a heartbeat now and tick again in
 * `nextInMs`. */
export interface TickVerdict {
  broken: boolean;
  reason: 'silent' | 'heartbeat failures' | null;
  send: boolean;
  nextInMs: number | null;
}

/** The heartbeat rule as a state machine, free of timers and sockets. */
export declare class HeartbeatTracker {
  constructor(options?: HeartbeatOptions);
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly threshold: number;
  readonly confirmMs: number;
  failures: number;
  onPong(): void;
  onErrorFrame(): ErrorFrameVerdict;
  /** A heartbeat tick after `silentMs` (monotonic) and `wallSilentMs` (wall clock) of silence. */
  onTick(silentMs: number, wallSilentMs?: number): TickVerdict;
}

export interface RegionEndpoint {
  region: string;
  url: string;
}

export type ProbeDecision = 'stay' | 'adopt-global' | 'return';

/** Client-assisted failover: which endpoint the next connect uses. */
export declare class FallbackPolicy {
  constructor(options?: {
    regions?: RegionEndpoint[];
    afterFailures?: number;
    recheckMs?: number;
    returnAfter?: number;
  });
  readonly regions: RegionEndpoint[];
  readonly afterFailures: number;
  readonly recheckMs: number;
  /** null: the global name; else an index into `regions`. */
  target: number | null;
  fallbacks: number;
  readonly onFallback: boolean;
  url(globalUrl: string): string;
  onRestored(region: string): void;
  /** A failed connect or session; true when the endpoint changed. */
  onFailure(): boolean;
  probesNeeded(): number;
  onProbe(healthyRegion: string | null, currentRegion: string | null): ProbeDecision;
  useGlobal(): void;
  redirectFrom(region: string): boolean;
  moveTo(target: number | null): void;
}

export type MoveDecision =
  | { to: string; target: number | null; afterMs: number; ignored?: undefined }
  | { ignored: string };

/** Decide on a moveTo frame: follow it only to a destination already known. */
export declare function decideMove(
  frame: Partial<MoveToFrame>,
  context: {
    servingRegion: string | null;
    globalUrl: string;
    regions?: RegionEndpoint[];
    maxWindowMs?: number;
  },
  random?: () => number,
): MoveDecision;

/** A 32-hex-digit bid id. */
export declare function newBidId(random?: () => number): string;
/** API Gateway's internal-error frame, or ours (`error` with code `internal`). */
export declare function isInternalError(frame: unknown): boolean;
/** Whether version vector `a` has seen everything `b` has. */
export declare function dominates(a: Versions | null | undefined, b: Versions | null | undefined): boolean;
/** Whether high bid `a` outranks `b` by the server's order. */
export declare function outranks(a: HighBid, b: HighBid): boolean;
/** The higher of two optional high bids. */
export declare function higherBid(a: HighBid | null | undefined, b: HighBid | null | undefined): HighBid | null;
/** The largest amount the protocol allows (minor units). */
export declare const MAX_AMOUNT: number;
/** The smallest amount that can win against the high bid a view shows, by the auction's
 * rules; `null` without rules or when nothing can beat it (conformance/minimum_bid.json). */
export declare function minimumNextBid(auction: Pick<AuctionView, 'highBid' | 'startingPrice' | 'minIncrement'> | null | undefined): number | null;

/** A value an op may carry: plain objects, arrays, strings, safe integers, booleans, null. */
export type OpValue = null | boolean | number | string | OpValue[] | { [key: string]: OpValue | undefined };
/** An op's canonical JSON (conformance/digest.json); throws a TypeError for a value that has
 * none (a fraction, an unsafe integer, a lone surrogate, a non-plain object, nesting past 64). */
export declare function canonicalJson(value: OpValue): string;
/** An op's digest: 128-bit FNV-1a of its canonical JSON, 32 lower-case hex digits. */
export declare function opDigest(value: OpValue): string;

export interface Settlement {
  bidId: string;
  /** Whether the bid stands: the final word on a doubtful bid. */
  stands: boolean;
  region: string | null;
}

/** The client's book of its own bids: replay, doubt, settlement, the merged view. */
/** Bids made while disconnected: at most `max` wait, one older than `maxAgeMs` when a session
 * opens is dropped unsent (`bidExpired`). */
export declare const OFFLINE_BIDS: Readonly<{ max: number; maxAgeMs: number }>;
/** Whether a bid queued `ageMs` ago is too old to send when a session opens. */
export declare function offlineBidExpired(ageMs: number, maxAgeMs?: number): boolean;

/** One op in an [OpBook]: the app's `fields` (also spread on the entry), its frame and digest. */
export interface OpEntry<F extends object = Record<string, unknown>> {
  frame: string;
  digest: string;
  topic?: string;
  fields: F;
}

/** A settlement in the op book's words. */
export interface OpSettlement {
  opId: string;
  stands: boolean;
  region: string | null;
}

/** The client's book of its own writes for any app: replay with the same op id after every
 * reconnect, doubt, settlement by op id and digest, the settle window, the offline queue. */
export declare class OpBook<F extends object = Record<string, unknown>> {
  constructor(options?: { settleWindowMs?: number; offline?: { max?: number; maxAgeMs?: number }; finalReasons?: string[] });
  readonly settleWindowMs: number;
  readonly offline: { max: number; maxAgeMs: number };
  /** Rejection reasons that stay final even after a replay (the op id reused). */
  readonly finalReasons: Set<string>;
  readonly unconfirmed: Map<string, OpEntry<F> & F & { sends: number; queuedAt: number }>;
  readonly doubtful: Map<string, OpEntry<F> & F & { since: number; unknown: boolean }>;
  /** Throws when an op made offline finds `offline.max` already waiting. */
  add(opId: string, frame: string, digest: string, sentNow: boolean, now?: number, topic?: string, fields?: F): void;
  queued(): number;
  expireOffline(now?: number): string[];
  replay(): string[];
  onResult(opId: string, status: BidStatus, reason: string | null | undefined, now: number): { fields: F | null; doubtful: boolean };
  /** The doubtful op ids of `topic` (and of no topic), the oldest first. */
  doubtsOf(topic: string): string[];
  doubtfulTopics(): string[];
  /** `standing`: the `opId/digest` keys of the caller's copies a read of `topic` shows. */
  settle(topic: string | undefined, standing: Set<string>, region: string | null): { settled: OpSettlement[]; resend: string[] };
  /** A push shows the caller's op standing with this payload digest. */
  settleShown(opId: string, digest: string, region: string | null): OpSettlement[];
  expire(now: number): OpSettlement[];
}

export declare class BidBook {
  constructor(options?: { settleWindowMs?: number; offline?: { max?: number; maxAgeMs?: number } });
  /** The bids as ops (op id = bidId, digest of `{amount}`). */
  readonly ops: OpBook<{ amount: number; auctionId?: string }>;
  readonly settleWindowMs: number;
  readonly offline: { max: number; maxAgeMs: number };
  /** Each auction's versions and high bid as this view knows them. */
  readonly auctions: Map<string, { versions: Versions | null; high: HighBid | null }>;
  userId: string | null;
  readonly unconfirmed: Map<string, { frame: string; amount: number; sends: number; queuedAt: number; auctionId?: string }>;
  readonly doubtful: Map<string, { frame: string; amount: number; since: number; unknown: boolean; auctionId?: string }>;
  known(auctionId: string): { versions: Versions | null; high: HighBid | null };
  /** The getState frame for `auctionId`, naming its doubtful bids. */
  stateRequest(auctionId: string): string;
  /** The auctions that have doubtful bids. */
  doubtfulAuctions(): string[];
  behind(versions: Versions | null | undefined, auctionId: string): boolean;
  /** Throws when a bid made offline finds `offline.max` already waiting. `auctionId`: the
   * one the frame names, by default. */
  add(bidId: string, frame: string, amount: number, sentNow: boolean, now?: number, auctionId?: string): void;
  queued(): number;
  /** The bids made offline that are too old to send now, dropped; call before `replay`. */
  expireOffline(now?: number): string[];
  replay(): string[];
  onResult(frame: BidResultFrame, now: number): { amount: number | null; doubtful: boolean };
  onState(frame: StateFrame): { settled: Settlement[]; resend: string[] };
  onUpdate(frame: BidUpdateFrame): { stale: boolean; settled: Settlement[]; view: UpdateView | null };
  expire(now: number): Settlement[];
}

// ---------------------------------------------------------------------------------------------
// The reconnecting client.

/** A fresh token for every connect. Throw (or reject) when none can be had: the client
 * counts it as a failed attempt and backs off. */
/** A token for every (re)connect. `refresh`: the last attempt never opened (a browser cannot
 * tell a refused token from a network failure), so a cached token may be the problem. Throw a
 * `TokenDenied` when no token will come: the client gives up at once. */
export type TokenProvider = (context: { refresh: boolean }) => string | Promise<string>;
/** Thrown by a token provider when no token will come (the user signed out). */
export declare class TokenDenied extends Error {
  constructor(message?: string);
}
/** Whether the next retry is one too many (`maxAttempts` null: never). */
export declare function givesUp(attempt: number, maxAttempts: number | null | undefined): boolean;
/** Whether a token provider's error ends the client at once (a `TokenDenied` does). */
export declare function tokenErrorGivesUp(error: unknown): boolean;

/** What the client needs of a WebSocket: the platform's (`globalThis.WebSocket`) and the `ws`
 * package's both fit. The client only assigns the handlers, so their parameters are `any`:
 * each implementation's own event types (DOM `Event`, `MessageEvent`, `CloseEvent`; `ws`'s)
 * are accepted as they are. */
export interface WebSocketLike {
  readonly readyState?: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  onopen: ((event: any) => void) | null;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  onmessage: ((event: any) => void) | null;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  onclose: ((event: any) => void) | null;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  onerror: ((event: any) => void) | null;
}

/** A WebSocket class: `new (url, protocols?)`, as the platform's and `ws`'s are. */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** Where the token goes: `?token=` on the URL (default), or the subprotocol
 * (`Sec-WebSocket-Protocol: wsdr, <token>`, docs/AUTH.md), which keeps it out of URLs and
 * their logs. */
export type TokenPlacement = 'query' | 'subprotocol';
/** The protocol name offered beside a subprotocol token. */
export declare const SUBPROTOCOL: 'wsdr';
/** Opens `url` with the token where `placement` says. */
export declare function openSocket(WebSocketClass: WebSocketConstructor, url: string, token: string, placement?: TokenPlacement): WebSocketLike;

export interface AuctionClientOptions {
  /** The global name, `wss://auction.example.com` (or one Region's URL). */
  url: string;
  tokenProvider: TokenProvider;
  /** The auction this client watches first: the view's `auction`, `bid()`'s default. */
  auctionId?: string;
  /** More auctions over the same socket (each in the view's `auctions`); `watch()` adds one
   * later. */
  auctionIds?: string[];
  /** Topics of any app whose every op the client holds (a chat room, `chat:<room>`); `join()`
   * adds one later. */
  topics?: string[];
  /** The debug hook: every event and every frame sent and received (a logger's throw is
   * ignored). */
  log?: (entry: LogEntry) => void;
  /** Each Region's own endpoint: enables client-assisted failover. */
  regions?: RegionEndpoint[];
  heartbeatIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  /** Failed heartbeat rounds in a row that break the session (default 2). */
  failureThreshold?: number;
  backoff?: BackoffOptions;
  /** How long a doubtful bid may wait for its settlement, ms (default 120000). */
  settleWindowMs?: number;
  /** Bids made while disconnected (default 16 at most, dropped unsent after 30 s). */
  offlineBids?: { max?: number; maxAgeMs?: number };
  /** Divides every duration (the lab's time scale). */
  timeScale?: number;
  /** The WebSocket implementation (default the global one). */
  WebSocket?: WebSocketConstructor;
  /** Where the token goes (default `query`). */
  tokenPlacement?: TokenPlacement;
  /** Reconnects in a row before giving up (`gaveUp`, state `failed`); default: never. */
  maxAttempts?: number;
  /** Where the browser announces `online` (default `window`): a retry waiting out its backoff
   * then goes at once. */
  networkEvents?: Pick<EventTarget, 'addEventListener' | 'removeEventListener'> | null;
}

/** `failed`: gave up for good (`gaveUp` says why); `closed`: the app closed the client. */
export type ConnectionState = 'connecting' | 'connected' | 'reconnecting' | 'closed' | 'failed';

export interface StatusDetail {
  state: ConnectionState;
  attempt: number;
  url?: string;
  region?: string;
  /** null while offline: the retry waits for `online`. */
  delayMs?: number | null;
  reason?: string;
  /** With `reconnecting` and `failed`: why, as a number (`REASON_CODES`). */
  code?: ReasonCode;
  /** With `reconnecting`: when the retry goes (ms since the epoch); null while offline (the
   * retry waits for the browser's `online`). */
  retryAt?: number | null;
}

/** One entry of the debug hook (`log`): an event, or a frame sent (`send`) or received
 * (`receive`, the raw text). */
export interface LogEntry {
  type: keyof AuctionClientEventMap | 'send' | 'receive' | string;
  detail: unknown;
  /** When (ms since the epoch). */
  at: number;
}

/** The names of the reason codes (conformance/reason_codes.json). */
export type ReasonCodeName =
  | 'heartbeat_failures'
  | 'silent'
  | 'server_closed'
  | 'connect_failed'
  | 'connect_timeout'
  | 'socket_error'
  | 'token_unavailable'
  | 'client_closed'
  | 'reconnect_asked'
  | 'returning'
  | 'moved'
  | 'redirected'
  | 'offline'
  | 'attempts_exhausted'
  | 'token_denied';

/** A reason code's number: 4000-4099 a session's end, 4100-4199 the client stopping. */
export type ReasonCode = number;

/** Why a session ended and why the client gave up, as numbers both clients give alike. */
export declare const REASON_CODES: Readonly<Record<ReasonCodeName, ReasonCode>>;

export interface RestoredDetail {
  region: string;
  auction: AuctionView;
  you: You;
  /** How long the user was without a session, ms; null on the first connect, and for every
   * state after a session's first of that auction. */
  outageMs: number | null;
  /** Whether this is the client's first auction (`auctionId`): the view's `auction`. */
  primary?: boolean;
}

export interface UpdateView extends BidUpdateFrame {}

export interface BidResultDetail extends BidResultFrame {
  amount: number | null;
  /** true: neither accepted nor rejected for sure yet; a `bidSettled` follows. */
  doubtful: boolean;
}

export interface EndpointDetail {
  url: string;
  regional: boolean;
  reason: string;
}

export interface MoveScheduledDetail {
  to: string;
  afterMs: number;
  reason: string;
}

/** The event a listener receives: the platform's `CustomEvent` at run time, declared here by
 * what a listener reads, so that the declarations need no DOM lib (a Node-only project's
 * `lib: ["ES2022"]` type-checks them). */
export interface WsdrEvent<T> {
  readonly type: string;
  readonly detail: T;
}

/** The listener options the platform's `addEventListener` takes. */
export interface WsdrListenerOptions {
  capture?: boolean;
  once?: boolean;
  passive?: boolean;
  signal?: { readonly aborted: boolean };
}

/** Any listener: a function or an object with `handleEvent`. */
export type WsdrListener = ((event: any) => void) | { handleEvent(event: any): void };

export interface AuctionClientEventMap {
  status: WsdrEvent<StatusDetail>;
  restored: WsdrEvent<RestoredDetail>;
  update: WsdrEvent<UpdateView>;
  bidResult: WsdrEvent<BidResultDetail>;
  bidSettled: WsdrEvent<Settlement>;
  /** The client stopped for good: `maxAttempts` ran out, or the token provider threw a
   * `TokenDenied`. Sign the user in again, then make a new client. */
  gaveUp: WsdrEvent<{ reason: string; code: ReasonCode }>;
  /** A bid was made (`bid()`): sent now, or waiting for the connection. */
  bidSent: WsdrEvent<{ bidId: string; amount: number }>;
  /** A bid made offline was too old when the next session opened: dropped, never sent. */
  bidExpired: WsdrEvent<{ bidId: string }>;
  endpoint: WsdrEvent<EndpointDetail>;
  moveScheduled: WsdrEvent<MoveScheduledDetail>;
  /** `closeCode`: the socket's close code, when it closed. */
  disconnected: WsdrEvent<{ reason: string; code: ReasonCode; closeCode?: number }>;
  /** A joined topic's answer (`topicState`): the copies it brought that were not held. */
  topicRestored: WsdrEvent<TopicDetail & { complete: boolean; outageMs: number | null }>;
  /** A joined topic's push that brought copies not held. */
  topicUpdated: WsdrEvent<TopicDetail>;
  /** A hole in a joined topic the serving Region cannot fill now (said once per hole). */
  discontinuity: WsdrEvent<{ topic: string; region: string; heldTo: Versions; versions: Versions }>;
  /** A write was made (`write()`): sent now, or waiting for the connection. */
  writeSent: WsdrEvent<{ opId: string; topic: string; op: unknown }>;
  /** The server's answer to a write (`writeResult`); `doubtful` as a bid's. */
  writeResult: WsdrEvent<{ opId: string; status: BidStatus; reason: string | null; region: string; doubtful: boolean }>;
  /** The final word on a doubtful write. */
  writeSettled: WsdrEvent<{ opId: string; stands: boolean; region: string | null }>;
  /** A write made offline was too old when the next session opened: dropped, never sent. */
  writeExpired: WsdrEvent<{ opId: string }>;
}

/** One op copy of a topic, as the server sends it (`topicState`, `topicUpdate`). */
export interface OpCopy {
  author: string;
  opId: string;
  region: string;
  /** Its place in `log` (a Region's count, or strong mode's `global`). */
  position: number;
  log: string;
  at: number;
  digest: string;
  op: unknown;
}

/** What a topic answer or push brought. */
export interface TopicDetail {
  topic: string;
  region: string;
  versions: Versions;
  view: unknown;
  added: OpCopy[];
}

/** A joined topic as the view shows it. */
export interface TopicView {
  /** Every copy held (order them as the app does: the chat room by earliest copy). */
  copies: OpCopy[];
  versions: Versions;
  view: unknown;
  complete: boolean;
  /** Copies the serving Region counts but cannot give now; null when none. */
  hole: { heldTo: Versions; versions: Versions } | null;
}

/** One write to a topic, as the view shows it. */
export interface WriteView {
  topic: string;
  op: unknown;
  status: BidStatus | 'sent' | 'expired';
  reason: string | null;
  region: string | null;
  doubtful: boolean;
  stands?: boolean;
}

/** A chat room's message as `conversation` shows it. */
export interface ChatMessage {
  author: string;
  opId: string;
  text: string;
  /** When its earliest copy was accepted (that Region's clock), and where. */
  at: number;
  region: string;
  digest: string;
}

/** A chat room's messages from the copies held, in the one order every client shows (earliest
 * copy's time, then Region, author, op id, digest). */
export declare function conversation(copies: readonly OpCopy[]): ChatMessage[];

/** A topic as the client holds it: copies by log and position, the frontier, holes. */
export declare class TopicLog {
  constructor(topic: string);
  readonly topic: string;
  readonly versions: Versions;
  frontier(): Versions;
  isBehind(versions: Versions): boolean;
  /** The logs with a hole: `[frontier, count]` each. */
  holes(): Record<string, [number, number]>;
  counted(versions: Versions): void;
  merge(versions: Versions, view: unknown, ops: OpCopy[]): { added: OpCopy[]; behind: boolean };
  answered(merged: { added: OpCopy[] }, complete: boolean): 'done' | 'again' | { hole: Versions };
  worthAsking(): boolean;
  request(opIds?: string[]): string;
}

/** The reconnecting auction client (docs/CLIENT.md). */
/** One of the user's bids, as the view shows it. */
export interface BidView {
  amount: number | null;
  /** `sent` until answered; `expired`: made offline, too old when the connection came back, never sent. */
  status: BidStatus | 'sent' | 'expired';
  reason: string | null;
  region: string | null;
  /** Neither accepted nor rejected for sure yet: show it as pending, not as lost. */
  doubtful: boolean;
  /** The final word on a doubtful bid, once settled. */
  stands?: boolean;
}

/** What an app renders: the reduction of the client's events (`client.state`, the hook). */
export interface ClientView {
  connection: ConnectionState;
  /** The Region serving this session (every frame names it). */
  region: string | null;
  /** The first auction as the serving Region last told it; null until its first state. */
  auction: AuctionView | null;
  /** Every watched auction by id, as the serving Region last told it (pushes merged). */
  auctions: Readonly<Record<string, AuctionView>>;
  you: You | null;
  /** How long the last outage lasted, ms (null before any). */
  outageMs: number | null;
  endpoint: EndpointDetail | null;
  bids: Readonly<Record<string, BidView>>;
  /** Joined topics by topic (a topic appears with its first answer). Always present in the
   * views the client produces; optional so that a view built by hand for an earlier version
   * still type-checks. */
  topics?: Readonly<Record<string, TopicView>>;
  /** Writes to topics by op id; present as `topics` is. */
  writes?: Readonly<Record<string, WriteView>>;
  /** The last disconnect's reason; after `failed`, why the client gave up. */
  lastDisconnect: string | null;
  /** The last disconnect's reason code; after `failed`, the give-up's (4100, 4101). */
  lastDisconnectCode: ReasonCode | null;
  /** The connect attempt under way (0 on the first; reset by a stable session). */
  attempt: number;
  /** While `reconnecting`: when the retry goes (ms since the epoch), for "retrying in N s". */
  retryAt: number | null;
}

/** The view before any event. */
export declare const INITIAL_VIEW: ClientView;
/** The view after one client event (pure). */
export declare function reduceView(state: ClientView, type: string, detail: unknown): ClientView;

/** An `EventTarget` at run time (events in `AuctionClientEventMap`). */
export declare class AuctionClient {
  constructor(options: AuctionClientOptions);
  /** The view so far, for a listener that comes late (the hook starts from it). */
  readonly state: ClientView;
  /** The first watched auction (null if none yet). */
  readonly auctionId: string | null;
  /** Every auction watched over this socket, in the order they were added. */
  readonly auctionIds: readonly string[];
  readonly globalUrl: string;
  readonly book: BidBook;
  readonly policy: FallbackPolicy | null;
  /** Connect; returns the client. */
  start(): this;
  /** Close for good. */
  close(): void;
  /** Connect now: ends the current session (a "reconnect" button) or cuts a retry's wait. */
  reconnect(): void;
  /** Resolves with the serving Region when a session is connected (at once if one is);
   * rejects if the client is closed or gives up first. */
  whenConnected(): Promise<{ region: string }>;
  /** Watch one more auction over this socket (its state now if connected, and after every
   * reconnect). Throws on an empty id. */
  watch(auctionId: string): void;
  /** Send a bid (a positive integer of minor units) in `auctionId` (default: the first
   * auction; another is watched from now on); returns its bidId. Throws on a bad amount, or
   * when no auction is given or watched. */
  bid(amount: number, auctionId?: string): string;
  /** Hold every op of `topic` (`<namespace>:<name>`) over this socket. Throws on a bad topic. */
  join(topic: string): void;
  /** Write `op` to `topic` (joined from now on); returns its op id. Throws on an op with no
   * canonical JSON form. */
  write(topic: string, op: unknown): string;
  dispatchEvent(event: { readonly type: string }): boolean;
  addEventListener<K extends keyof AuctionClientEventMap>(
    type: K,
    listener: (event: AuctionClientEventMap[K]) => void,
    options?: boolean | WsdrListenerOptions,
  ): void;
  addEventListener(
    type: string,
    listener: WsdrListener | null,
    options?: boolean | WsdrListenerOptions,
  ): void;
  removeEventListener<K extends keyof AuctionClientEventMap>(
    type: K,
    listener: (event: AuctionClientEventMap[K]) => void,
    options?: boolean | Pick<WsdrListenerOptions, 'capture'>,
  ): void;
  removeEventListener(
    type: string,
    listener: WsdrListener | null,
    options?: boolean | Pick<WsdrListenerOptions, 'capture'>,
  ): void;
}
