// Unit tests of the browser client's pure policy: backoff, heartbeat rule, fallback.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_HERD_HINT_MS, backoffDelay, HeartbeatTracker, FallbackPolicy, isInternalError, newBidId, decideMove, MAX_MOVE_WINDOW_MS } from '../wsdr-client.js';

test('full jitter stays inside [0, min(cap, base * 2^attempt)] and covers the window', () => {
  for (const [attempt, ceiling] of [[0, 2000], [1, 4000], [2, 8000], [3, 16000], [4, 20000], [40, 20000]]) {
    assert.equal(backoffDelay(attempt, {}, () => 0), 0);
    assert.equal(backoffDelay(attempt, {}, () => 0.999999), ceiling * 0.999999);
    assert.equal(backoffDelay(attempt, { jitter: false }), ceiling);
  }
  // Uniform: the mean of many draws is close to half the window (Math.random, 10k draws).
  let sum = 0;
  for (let i = 0; i < 10000; i += 1) sum += backoffDelay(2, {});
  const mean = sum / 10000;
  assert.ok(mean > 3800 && mean < 4200, `mean ${mean}`);
});

test('a refused-for-load handshake widens the window to the herd window', () => {
  assert.equal(backoffDelay(0, { herdWindowMs: 20000, throttled: true, jitter: false }), 20000);
  assert.equal(backoffDelay(0, { herdWindowMs: 20000, throttled: false, jitter: false }), 2000);
  assert.equal(backoffDelay(0, { floorMs: 500 }, () => 0), 500);
});

test('two unanswered heartbeats break the session; one lost pong does not', () => {
  const hb = new HeartbeatTracker({ intervalMs: 30000, timeoutMs: 35000 });
  let t = hb.onTick(30000);
  assert.deepEqual([t.send, t.nextInMs], [true, 30000]);
  // The pong is lost: at the next tick one failure, the confirmation probe comes 5 s later.
  t = hb.onTick(60000);
  assert.deepEqual([t.broken, t.nextInMs], [false, 5000]);
  hb.onPong();
  t = hb.onTick(5000);
  assert.deepEqual([t.broken, t.nextInMs], [false, 30000], 'healthy again, normal interval');
  // Now nothing comes back twice in a row.
  hb.onTick(35000);
  t = hb.onTick(65000);
  assert.deepEqual([t.broken, t.reason], [true, 'silent']);
});

test('error frames count once per round and break after two rounds', () => {
  const hb = new HeartbeatTracker({ intervalMs: 30000, timeoutMs: 35000 });
  hb.onTick(0);
  let v = hb.onErrorFrame();
  assert.deepEqual(v, { broken: false, nextInMs: 5000 });
  // A bid failing in the same round is the same blip.
  v = hb.onErrorFrame();
  assert.deepEqual(v, { broken: false, nextInMs: null });
  assert.equal(hb.onTick(100).broken, false, 'the round already counted its failure');
  v = hb.onErrorFrame();
  assert.equal(v.broken, true);
});

test('the gateway error frame and our internal error are both failures', () => {
  assert.ok(isInternalError({ message: 'Internal server error', connectionId: 'x', requestId: 'y' }));
  assert.ok(isInternalError({ type: 'error', code: 'internal', message: 'm', region: 'r' }));
  assert.ok(!isInternalError({ type: 'error', code: 'invalid_field', message: 'm', region: 'r' }));
  assert.ok(!isInternalError({ type: 'pong', region: 'r', ts: 1 }));
});

test('bid ids are 32 hex digits', () => {
  assert.match(newBidId(), /^[0-9a-f]{32}$/);
});

const regions = [
  { region: 'us-east-1', url: 'ws://east' },
  { region: 'us-west-2', url: 'ws://west' },
];

test('fallback: one failure stays, two move to the other Region, a restore resets', () => {
  const p = new FallbackPolicy({ regions });
  p.onRestored('us-east-1');
  assert.equal(p.onFailure(), false);
  p.onRestored('us-east-1');
  assert.equal(p.onFailure(), false);
  assert.equal(p.url('ws://global'), 'ws://global');
  assert.equal(p.onFailure(), true);
  assert.equal(p.url('ws://global'), 'ws://west');
});

test('fallback: DNS agreeing is adopted at once; returning needs a doubling streak', () => {
  const p = new FallbackPolicy({ regions });
  p.onRestored('us-east-1');
  const needed = [];
  for (let round = 0; round < 4; round += 1) {
    p.onFailure();
    p.onFailure();
    assert.ok(p.onFallback);
    p.onRestored('us-west-2');
    assert.equal(p.onProbe(null, 'us-west-2'), 'stay');
    let probes = 0;
    let decision;
    do {
      probes += 1;
      decision = p.onProbe('us-east-1', 'us-west-2');
    } while (decision !== 'return');
    needed.push(probes);
    p.onRestored('us-east-1');
  }
  assert.deepEqual(needed, [3, 6, 12, 24]);
  p.onFailure();
  p.onFailure();
  assert.equal(p.onProbe('us-west-2', 'us-west-2'), 'adopt-global');
  assert.equal(p.onFallback, false);
});

const GLOBAL = 'wss://auction.example.com';
const REGIONS = [
  { region: 'us-east-1', url: 'wss://use1.auction.example.com' },
  { region: 'us-west-2', url: 'wss://usw2.auction.example.com' },
];

test('moveTo: a known Region goes to its own endpoint, else the global name', () => {
  const at = (frame, regions = REGIONS) => decideMove({ region: 'us-east-1', windowMs: 20000, ...frame }, { servingRegion: 'us-east-1', globalUrl: GLOBAL, regions }, () => 0.5);
  assert.deepEqual(at({ to: 'us-west-2' }), { to: 'us-west-2', target: 1, afterMs: 10000 });
  assert.deepEqual(at({ to: 'us-west-2', endpoint: 'wss://usw2.auction.example.com' }), { to: 'us-west-2', target: 1, afterMs: 10000 });
  assert.deepEqual(at({ to: 'us-west-2' }, []), { to: 'us-west-2', target: null, afterMs: 10000 });
  assert.deepEqual(at({ to: 'us-west-2', endpoint: GLOBAL }, []), { to: 'us-west-2', target: null, afterMs: 10000 });
});

test('moveTo: unknown or mismatched destinations are ignored, and the window is capped', () => {
  const at = (frame) => decideMove({ region: 'us-east-1', windowMs: 20000, ...frame }, { servingRegion: 'us-east-1', globalUrl: GLOBAL, regions: REGIONS }, () => 0.999);
  assert.ok(at({ to: 'us-west-2', endpoint: 'wss://evil.example.net' }).ignored);
  assert.ok(at({ to: 'us-west-2', endpoint: 'wss://use1.auction.example.com' }).ignored);
  assert.ok(at({ to: 'us-east-1' }).ignored);
  assert.ok(at({ to: 'us-west-2', windowMs: 86400000 }).afterMs <= MAX_MOVE_WINDOW_MS);
  assert.ok(at({ to: 'us-west-2', windowMs: 86400000, afterMs: 86400000 }).afterMs <= MAX_MOVE_WINDOW_MS);
});

test('moveTo: the delay (afterMs) comes before the window', () => {
  const at = (random) => decideMove({ region: 'us-east-1', to: 'us-west-2', windowMs: 1000, afterMs: 12000 }, { servingRegion: 'us-east-1', globalUrl: GLOBAL, regions: REGIONS }, random);
  assert.equal(at(() => 0).afterMs, 12000);
  assert.equal(at(() => 0.5).afterMs, 12500);
  assert.ok(at(() => 0.999).afterMs < 13000);
});

test('fallback policy follows a move and forgets its failures', () => {
  const policy = new FallbackPolicy({ regions: REGIONS });
  policy.onFailure();
  policy.moveTo(1);
  assert.equal(policy.url(GLOBAL), 'wss://usw2.auction.example.com');
  assert.equal(policy.failures, 0);
  policy.moveTo(null);
  assert.equal(policy.url(GLOBAL), GLOBAL);
});

test('backoff: the first retry spreads over the advertised herd window, later ones double', () => {
  assert.equal(backoffDelay(0, { advertisedHerdMs: 60000 }, () => 1), 60000);
  assert.equal(backoffDelay(0, { advertisedHerdMs: 300 }, () => 1), 2000, 'a small hint changes nothing');
  assert.equal(backoffDelay(1, { advertisedHerdMs: 60000 }, () => 1), 4000);
  assert.equal(backoffDelay(0, { advertisedHerdMs: 60000, herdHint: false }, () => 1), 2000);
  assert.equal(backoffDelay(0, { advertisedHerdMs: 1e12 }, () => 1), MAX_HERD_HINT_MS, 'capped');
  assert.equal(backoffDelay(3, { throttled: true, herdWindowMs: 20000, advertisedHerdMs: 60000 }, () => 1), 60000);
});

test('a redirect sends the next connect to another Region at once, or nowhere if none is known', () => {
  const regions = [
    { region: 'us-east-1', url: 'wss://east' },
    { region: 'us-west-2', url: 'wss://west' },
  ];
  const p = new FallbackPolicy({ regions });
  assert.equal(p.redirectFrom('us-east-1'), true);
  assert.equal(p.url('wss://global'), 'wss://west');
  assert.equal(p.redirectFrom('us-west-2'), true);
  assert.equal(p.url('wss://global'), 'wss://east');
  assert.equal(new FallbackPolicy({ regions: [] }).redirectFrom('us-east-1'), false);
});

test('backoff is per endpoint: the first connect after a fallback draws from the first window', async () => {
  const { AuctionClient } = await import('../wsdr-client.js');
  const client = new AuctionClient({
    url: 'wss://auction.example.com',
    tokenProvider: async () => 't',
    auctionId: 'lot-1',
    regions: [{ region: 'us-east-1', url: 'wss://use1.example.com' }, { region: 'us-west-2', url: 'wss://usw2.example.com' }],
  });
  client.policy.onRestored('us-east-1');
  client.closed = false;
  const statuses = [];
  client.addEventListener('status', (e) => statuses.push(e.detail));
  // No reconnect actually runs: connect() returns at once once the client is closed.
  client.connect = async () => {};
  client.failed('heartbeat failures', 4000, true); // the first failure: stays on the global name
  client.failed('handshake refused', 4003, true); // the second: moves to us-west-2's endpoint
  const retries = statuses.filter((s) => s.state === 'reconnecting');
  assert.deepEqual(retries.map((s) => s.attempt), [1, 1], 'the second retry starts a new endpoint\'s backoff');
  assert.ok(retries[1].delayMs <= 2000, `${retries[1].delayMs}`);
  assert.equal(client.policy.url(client.globalUrl), 'wss://usw2.example.com');
  client.closed = true;
});

test('the token goes in the query string or, asked, in the subprotocol: never both', async () => {
  const { openSocket, SUBPROTOCOL } = await import('../wsdr-client.js');
  const opened = [];
  class Recorder {
    constructor(url, protocols) {
      opened.push({ url, protocols });
    }
  }
  openSocket(Recorder, 'wss://a.example/ws', 'ey.J/w+t', 'query');
  openSocket(Recorder, 'wss://a.example/ws?x=1', 'tok', 'query');
  openSocket(Recorder, 'wss://a.example/ws', 'ey.J.w', 'subprotocol');
  assert.deepEqual(opened, [
    { url: 'wss://a.example/ws?token=ey.J%2Fw%2Bt', protocols: undefined },
    { url: 'wss://a.example/ws?x=1&token=tok', protocols: undefined },
    { url: 'wss://a.example/ws', protocols: [SUBPROTOCOL, 'ey.J.w'] },
  ]);
  assert.equal(SUBPROTOCOL, 'wsdr');
});

/** A WebSocket class whose every socket is refused (closed 1006 without opening), counting
 * how many were opened. */
function refusedSockets() {
  const counter = { opened: 0, Socket: null };
  counter.Socket = class {
    constructor() {
      counter.opened += 1;
      setTimeout(() => this.onclose?.({ code: 1006 }), 0);
    }
    send() {}
    close() {}
  };
  return counter;
}

// Bounded: a client that never gives up fails the test instead of hanging it.
test('the client gives up: after maxAttempts failed reconnects, or at once on TokenDenied', { timeout: 20000 }, async () => {
  const { AuctionClient, TokenDenied } = await import('../wsdr-client.js');
  const refusing = refusedSockets();
  const Refused = refusing.Socket;
  const run = (options) => new Promise((resolve) => {
    const events = [];
    const refreshes = [];
    const client = new AuctionClient({
      url: 'wss://a.example', auctionId: 'lot-1', timeScale: 1000, WebSocket: Refused,
      tokenProvider: ({ refresh }) => { refreshes.push(refresh); return 'tok'; },
      ...options,
    });
    client.addEventListener('gaveUp', (e) => events.push(['gaveUp', e.detail.reason, e.detail.code]));
    client.addEventListener('disconnected', (e) => events.push(['disconnected', e.detail.reason, e.detail.code]));
    client.addEventListener('status', (e) => {
      events.push(['status', e.detail.state]);
      if (e.detail.state === 'failed') resolve({ events, refreshes });
      // A client that does not give up is stopped here, so that the assertions below fail
      // at once instead of the test waiting for it forever.
      if (events.length > 200) { client.close(); resolve({ events, refreshes }); }
    });
    client.start();
  });
  const bounded = await run({ maxAttempts: 2 });
  assert.equal(refusing.opened, 3, 'the first connect and two retries');
  assert.deepEqual(bounded.events.filter(([kind]) => kind === 'gaveUp').map(([, , code]) => code), [4100]);
  assert.deepEqual([...new Set(bounded.events.filter(([kind]) => kind === 'disconnected').map(([, , code]) => code))], [4003], 'connect failed');
  assert.equal(bounded.events.at(-1)[1], 'failed');
  assert.deepEqual(bounded.refreshes, [false, true, true], 'after a connect that never opened, a fresh token');
  refusing.opened = 0;
  const denied = await run({ tokenProvider: () => { throw new TokenDenied('signed out'); } });
  assert.equal(refusing.opened, 0, 'no socket without a token');
  assert.match(denied.events.find(([kind]) => kind === 'gaveUp')[1], /signed out/);
  assert.equal(denied.events.find(([kind]) => kind === 'gaveUp')[2], 4101);
});

test('client.state is the view so far, for a listener that comes late', async () => {
  const { AuctionClient, INITIAL_VIEW } = await import('../wsdr-client.js');
  let socket = null;
  class Open {
    constructor() {
      socket = this;
      this.sent = [];
      setTimeout(() => {
        this.onopen?.({});
        this.onmessage?.({ data: JSON.stringify({
          type: 'state', region: 'us-west-2',
          auction: { id: 'lot-1', item: 'lamp', highBid: null, bidCount: 0, version: 0, versions: {} },
          you: { userId: 'alice', lastBid: null, bids: [] },
        }) });
      }, 0);
    }
    send(frame) { this.sent.push(frame); }
    close() {}
  }
  const logged = [];
  const client = new AuctionClient({
    url: 'wss://a.example', auctionId: 'lot-1', WebSocket: Open, tokenProvider: () => 't',
    log: (entry) => logged.push(entry),
  });
  assert.equal(client.state, INITIAL_VIEW);
  const restored = new Promise((resolve) => client.addEventListener('restored', resolve));
  const connected = client.whenConnected();
  client.start();
  await restored;
  assert.deepEqual(await connected, { region: 'us-west-2' });
  assert.deepEqual(await client.whenConnected(), { region: 'us-west-2' }, 'at once when connected');
  // The debug hook saw the getState go out, the state come in, and the events.
  const types = logged.map((e) => e.type);
  assert.ok(types.includes('send') && types.includes('receive') && types.includes('restored'), `${types}`);
  assert.match(logged.find((e) => e.type === 'send').detail, /getState/);
  const bidId = client.bid(150000);
  const view = client.state;
  assert.equal(view.connection, 'connected');
  assert.equal(view.region, 'us-west-2');
  assert.equal(view.auction.id, 'lot-1');
  assert.deepEqual(view.bids[bidId], { amount: 150000, status: 'sent', reason: null, region: null, doubtful: false });
  assert.ok(socket.sent.some((f) => f.includes(bidId)));
  client.close();
  assert.equal(client.state.connection, 'closed');
});

test('the network coming back, or reconnect(), cuts a retry\'s backoff short', async () => {
  const { AuctionClient } = await import('../wsdr-client.js');
  const refusing = refusedSockets();
  const Refused = refusing.Socket;
  const network = new EventTarget();
  const client = new AuctionClient({
    url: 'wss://a.example', auctionId: 'lot-1', WebSocket: Refused, tokenProvider: () => 't',
    networkEvents: network,
    // Every retry waits a full minute unless cut short.
    backoff: { baseMs: 60000, capMs: 60000, floorMs: 60000, jitter: false },
  });
  const waiting = () => new Promise((resolve) => {
    const on = (e) => {
      if (e.detail.state === 'reconnecting' && e.detail.delayMs > 0) {
        client.removeEventListener('status', on);
        resolve();
      }
    };
    client.addEventListener('status', on);
  });
  let next = waiting();
  const connected = client.whenConnected();
  client.start();
  await next;
  assert.equal(refusing.opened, 1);
  // The view says which attempt, and when the waiting retry goes.
  assert.equal(client.state.attempt, 1);
  assert.ok(client.state.retryAt >= Date.now() + 50000, `${client.state.retryAt}`);
  next = waiting();
  network.dispatchEvent(new Event('online'));
  await next;
  assert.equal(refusing.opened, 2, 'online: connected at once, not a minute later');
  next = waiting();
  client.reconnect();
  await next;
  assert.equal(refusing.opened, 3, 'reconnect(): at once');
  client.close();
  await assert.rejects(connected, /closed/);
  assert.equal(client.state.retryAt, null);
  network.dispatchEvent(new Event('online'));
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(refusing.opened, 3, 'closed: the network coming back changes nothing');
});

test('several auctions over one socket: a state each, the first as `auction`, bids and heartbeats naming each', async (t) => {
  const { AuctionClient } = await import('../wsdr-client.js');
  const sockets = [];
  const auctionState = (id, amount) => JSON.stringify({
    type: 'state', region: 'us-west-2',
    auction: { id, item: id, highBid: amount === null ? null : { bidId: `h-${id}`, bidder: 'bob', amount, at: 1 }, bidCount: 0, version: 0, versions: { 'us-west-2': 1 } },
    you: { userId: 'alice', lastBid: null, bids: [] },
  });
  class Open {
    constructor() {
      sockets.push(this);
      this.sent = [];
      setTimeout(() => {
        this.onopen?.({});
        // The answers come in any order (API Gateway invokes the handler per frame).
        this.onmessage?.({ data: auctionState('lot-2', 200) });
        this.onmessage?.({ data: auctionState('lot-1', null) });
      }, 0);
    }
    send(frame) {
      const parsed = JSON.parse(frame);
      this.sent.push(parsed);
      if (parsed.action === 'heartbeat') {
        setTimeout(() => this.onmessage?.({ data: JSON.stringify({ type: 'pong', region: 'us-west-2', auctionId: parsed.auctionId }) }), 0);
      }
    }
    close() {}
  }
  const client = new AuctionClient({
    url: 'wss://a.example', auctionIds: ['lot-1', 'lot-2'], WebSocket: Open, tokenProvider: () => 't',
    heartbeatIntervalMs: 20, heartbeatTimeoutMs: 1000,
  });
  t.after(() => client.close());
  let restored = 0;
  const both = new Promise((resolve) => client.addEventListener('restored', () => { if (++restored === 2) resolve(); }));
  client.start();
  await both;
  assert.equal(sockets.length, 1, 'one socket');
  assert.deepEqual(sockets[0].sent.filter((f) => f.action === 'getState').map((f) => f.auctionId), ['lot-1', 'lot-2']);
  const view = client.state;
  assert.equal(view.auction.id, 'lot-1', 'the first auction, though its state came second');
  assert.deepEqual(Object.keys(view.auctions).sort(), ['lot-1', 'lot-2']);
  assert.equal(view.auctions['lot-2'].highBid.amount, 200);
  // A push of lot-2 updates lot-2 only.
  sockets[0].onmessage({ data: JSON.stringify({ type: 'bidUpdate', region: 'us-west-2', auctionId: 'lot-2', highBid: { bidId: 'h2', bidder: 'carol', amount: 250, at: 2 }, versions: { 'us-west-2': 2 } }) });
  assert.equal(client.state.auctions['lot-2'].highBid.amount, 250);
  assert.equal(client.state.auction.highBid, null);
  // A bid names its auction (the first by default); a new auction is watched at once.
  client.bid(300, 'lot-2');
  client.bid(100);
  client.watch('lot-3');
  const after = sockets[0].sent;
  assert.deepEqual(after.filter((f) => f.action === 'bid').map((f) => f.auctionId), ['lot-2', 'lot-1']);
  assert.deepEqual(after.at(-1), { action: 'getState', auctionId: 'lot-3' });
  assert.deepEqual(client.auctionIds, ['lot-1', 'lot-2', 'lot-3']);
  // Heartbeats name the watched auctions in turn.
  await new Promise((resolve) => setTimeout(resolve, 100));
  const named = sockets[0].sent.filter((f) => f.action === 'heartbeat').map((f) => f.auctionId);
  assert.ok(named.length >= 3, `${named}`);
  assert.deepEqual(named.slice(0, 3).sort(), ['lot-1', 'lot-2', 'lot-3']);
  client.close();
});

test('offline ends the session at once and holds retries until online', async (t) => {
  const { AuctionClient } = await import('../wsdr-client.js');
  let opened = 0;
  class Open {
    constructor() {
      opened += 1;
      setTimeout(() => {
        this.onopen?.({});
        this.onmessage?.({ data: JSON.stringify({ type: 'state', region: 'us-west-2', auction: { id: 'lot-1', highBid: null, versions: {} }, you: { userId: 'a', bids: [] } }) });
      }, 0);
    }
    send() {}
    close() {}
  }
  const network = new EventTarget();
  const client = new AuctionClient({ url: 'wss://a.example', auctionId: 'lot-1', WebSocket: Open, tokenProvider: () => 't', networkEvents: network });
  t.after(() => client.close());
  const events = [];
  client.addEventListener('disconnected', (e) => events.push(['disconnected', e.detail.code]));
  client.addEventListener('status', (e) => events.push(['status', e.detail.state, e.detail.delayMs]));
  await client.start().whenConnected();
  network.dispatchEvent(new Event('offline'));
  assert.deepEqual(events.slice(-2), [['disconnected', 4012], ['status', 'reconnecting', null]]);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(opened, 1, 'no retry while offline');
  assert.equal(client.state.lastDisconnectCode, 4012);
  network.dispatchEvent(new Event('online'));
  await client.whenConnected();
  assert.equal(opened, 2, 'online: connected at once');
});
