// The browser client's session, frame by frame, over a socket the test drives by hand: what it
// sends when a session opens, how it reads each answer, when it ends a session and what it
// carries into the next one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AuctionClient, REASON_CODES } from '../wsdr-client.js';
import { settle, sockets, until } from './sockets.js';
import { client, state } from './session-client.js';


/** A client whose first socket is open, nothing received yet. */
async function opened(t, options = {}) {
  const { all, Socket } = sockets();
  const { c, events } = client(Socket, options);
  t.after(() => c.close());
  c.start();
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  return { all, c, events };
}

/** A client whose first session is open and has had its first `state` (`first`). */
async function connected(t, options, first) {
  const opening = await opened(t, options);
  opening.all[0].deliver(first);
  return opening;
}

test('a bid unanswered when the socket drops is sent again, same bidId, after the next getState', async (t) => {
  const { all, c, events } = await opened(t);
  assert.deepEqual(all[0].sent, [{ action: 'getState', auctionId: 'lot-1' }]);
  all[0].deliver(state('us-east-1'));
  const bidId = c.bid(150);
  assert.deepEqual(all[0].frames('bid'), [{ action: 'bid', auctionId: 'lot-1', amount: 150, bidId }]);
  all[0].drop();
  await until(() => all.length === 2, 'a second socket');
  all[1].open();
  assert.deepEqual(all[1].sent, [
    { action: 'getState', auctionId: 'lot-1' },
    { action: 'bid', auctionId: 'lot-1', amount: 150, bidId },
  ]);
  // The other Region has not seen the first copy yet: its rejection is not final.
  all[1].deliver(state('us-west-2'));
  all[1].deliver({ type: 'bidResult', bidId, status: 'rejected', reason: 'too_low', region: 'us-west-2' });
  const result = events.find(([type]) => type === 'bidResult')[1];
  assert.equal(result.doubtful, true);
  assert.equal(result.amount, 150);
  assert.equal(c.state.bids[bidId].doubtful, true);
  // The next state lists the first copy: it stands.
  all[1].deliver(state('us-west-2', { bids: [{ bidId, amount: 150, at: 1, regions: ['us-east-1'] }] }));
  assert.deepEqual(events.find(([type]) => type === 'bidSettled')[1], { bidId, stands: true, region: 'us-west-2' });
  assert.equal(c.state.bids[bidId].stands, true);
  assert.equal(c.state.bids[bidId].doubtful, false);
});

test('a doubtful bid is named in the next getState, settled by its copy with the same amount only', async (t) => {
  const { all, c, events } = await connected(t, {}, state('us-east-1'));
  const bidId = c.bid(300);
  all[0].deliver({ type: 'bidResult', bidId, status: 'unknown', reason: 'unavailable', region: 'us-east-1' });
  assert.equal(events.at(-1)[1].doubtful, true);
  // A copy with another amount under the same bidId is not this bid: the unknown bid is sent again.
  const before = all[0].frames('bid').length;
  all[0].deliver(state('us-east-1', { settled: [{ bidId, stands: true, copies: [{ region: 'us-west-2', amount: 301 }] }] }));
  assert.equal(events.filter(([type]) => type === 'bidSettled').length, 0);
  assert.equal(all[0].frames('bid').length, before + 1, 'resent');
  all[0].deliver({ type: 'bidResult', bidId, status: 'unknown', reason: 'unavailable', region: 'us-east-1' });
  all[0].deliver(state('us-east-1', { settled: [{ bidId, stands: true, copies: [{ region: 'us-east-1', amount: 300 }] }] }));
  assert.deepEqual(events.filter(([type]) => type === 'bidSettled').map(([, d]) => d), [{ bidId, stands: true, region: 'us-east-1' }]);
});

test('a stale push changes nothing; a newer one is merged and reported', async (t) => {
  const { all, c, events } = await connected(t, {}, state('us-east-1', { versions: { 'us-east-1': 3 }, highBid: { bidId: 'h', bidder: 'bob', amount: 500, at: 1 } }));
  all[0].deliver({ type: 'bidUpdate', region: 'us-east-1', auctionId: 'lot-1', versions: { 'us-east-1': 2 }, highBid: { bidId: 'g', bidder: 'bob', amount: 400, at: 0 } });
  assert.equal(events.filter(([type]) => type === 'update').length, 0, 'older than the view: dropped');
  assert.equal(c.state.auction.highBid.amount, 500);
  all[0].deliver({ type: 'bidUpdate', region: 'us-east-1', auctionId: 'lot-1', versions: { 'us-east-1': 4 }, highBid: { bidId: 'i', bidder: 'carol', amount: 600, at: 2 } });
  assert.equal(events.filter(([type]) => type === 'update').length, 1);
  assert.equal(c.state.auction.highBid.amount, 600);
  assert.equal(c.state.auction.bidCount, 4);
  // A push of an auction this client does not watch is not folded into the view.
  all[0].deliver({ type: 'bidUpdate', region: 'us-east-1', auctionId: 'lot-9', versions: { 'us-east-1': 9 }, highBid: null });
  assert.equal(c.state.auctions['lot-9'], undefined);
});

test('a pong whose versions are ahead of the view asks for the state again; one behind does not', async (t) => {
  const { all } = await connected(t, {}, state('us-east-1', { versions: { 'us-east-1': 3, 'us-west-2': 1 } }));
  const reads = () => all[0].frames('getState').length;
  const first = reads();
  all[0].deliver({ type: 'pong', region: 'us-east-1', auctionId: 'lot-1', versions: { 'us-east-1': 3 } });
  assert.equal(reads(), first, 'nothing new');
  all[0].deliver({ type: 'pong', region: 'us-east-1', auctionId: 'lot-1', versions: { 'us-east-1': 3, 'us-west-2': 2 } });
  assert.equal(reads(), first + 1, 'a bid this view has not seen');
  all[0].deliver({ type: 'pong', region: 'us-east-1', auctionId: 'lot-7', versions: { 'us-east-1': 9 } });
  assert.equal(reads(), first + 1, 'an auction not watched');
});

test('two heartbeats without a pong end the session, and the next one opens with a getState', async (t) => {
  const { all, c, events } = await connected(t, { heartbeatIntervalMs: 5, heartbeatTimeoutMs: 8 }, state('us-east-1'));
  await until(() => all.length === 2, 'the broken session replaced');
  assert.ok(all[0].frames('heartbeat').length >= 1, 'it asked');
  const ended = events.find(([type]) => type === 'disconnected')[1];
  assert.match(ended.reason, /heartbeat|silent/);
  assert.ok(all[0].closedWith !== null, 'the dead socket was closed');
  all[1].open();
  assert.deepEqual(all[1].sent[0], { action: 'getState', auctionId: 'lot-1' });
});

test('a redirect decides nothing: the session ends and the bid goes to the next one', async (t) => {
  const { all, c, events } = await connected(t, {}, state('eu-west-1'));
  const bidId = c.bid(700);
  all[0].deliver({ type: 'bidResult', bidId, status: 'redirect', reason: 'no_quorum', region: 'eu-west-1' });
  const result = events.find(([type]) => type === 'bidResult')[1];
  assert.equal(result.doubtful, false);
  assert.equal(result.amount, 700);
  await until(() => all.length === 2, 'a new session');
  assert.match(events.find(([type]) => type === 'disconnected')[1].reason, /redirect/);
  all[1].open();
  assert.deepEqual(all[1].frames('bid'), [{ action: 'bid', auctionId: 'lot-1', amount: 700, bidId }]);
});

test('a getState answered no_quorum moves the client too; an unreadable frame is ignored', async (t) => {
  const { all, c, events } = await opened(t);
  all[0].deliver('not json');
  all[0].deliver({ type: 'error', code: 'invalid_field', message: 'x', region: 'eu-west-1' });
  await settle();
  assert.equal(all.length, 1, 'neither ends the session');
  all[0].deliver({ type: 'error', code: 'no_quorum', message: 'cut off', region: 'eu-west-1' });
  await until(() => all.length === 2, 'a new session');
  assert.match(events.find(([type]) => type === 'disconnected')[1].reason, /redirect/);
});

const REGIONS = [
  { region: 'us-east-1', url: 'wss://use1.example' },
  { region: 'us-west-2', url: 'wss://usw2.example' },
];

/** A client that knows both Regions' own endpoints, started, with the endpoints it moved to. */
function withRegions(t, options = {}) {
  const { all, Socket } = sockets();
  const { c, events } = client(Socket, { regions: REGIONS, ...options });
  const endpoints = [];
  c.addEventListener('endpoint', (e) => endpoints.push(e.detail));
  t.after(() => c.close());
  c.start();
  return { all, c, events, endpoints };
}

test("a move order to a known Region's endpoint: the session ends clean, the next connect goes there", async (t) => {
  const { all, Socket } = sockets();
  const { c, events } = client(Socket, { regions: REGIONS });
  const endpoints = [];
  c.addEventListener('endpoint', (e) => endpoints.push(e.detail));
  const scheduled = [];
  c.addEventListener('moveScheduled', (e) => scheduled.push(e.detail));
  t.after(() => c.close());
  c.start();
  await until(() => all.length === 1, 'a socket');
  assert.match(all[0].url, /^wss:\/\/global\.example/);
  all[0].open();
  all[0].deliver(state('us-east-1'));
  // An endpoint the client does not know, one of another Region, or the Region serving it
  // already: ignored (a frame cannot send a client anywhere it was not configured to go).
  all[0].deliver({ type: 'moveTo', region: 'us-east-1', to: 'us-west-2', endpoint: 'wss://evil.example', windowMs: 10, reason: 'drain' });
  all[0].deliver({ type: 'moveTo', region: 'us-east-1', to: 'us-west-2', endpoint: 'wss://use1.example', windowMs: 10, reason: 'drain' });
  all[0].deliver({ type: 'moveTo', region: 'us-east-1', to: 'us-east-1', windowMs: 10, reason: 'drain' });
  assert.deepEqual(scheduled, []);
  all[0].deliver({ type: 'moveTo', region: 'us-east-1', to: 'us-west-2', windowMs: 10, reason: 'drain' });
  all[0].deliver({ type: 'moveTo', region: 'us-east-1', to: 'us-east-1', windowMs: 10, reason: 'again' });
  assert.equal(scheduled.length, 1);
  assert.equal(scheduled[0].to, 'us-west-2');
  assert.ok(scheduled[0].afterMs >= 0 && scheduled[0].afterMs <= 10, `${scheduled[0].afterMs}`);
  await until(() => all.length === 2, 'the move');
  assert.match(all[1].url, /^wss:\/\/usw2\.example/);
  assert.deepEqual(endpoints.at(-1), { url: 'wss://usw2.example', regional: true, reason: 'the server moved this client to us-west-2' });
  const ended = events.find(([type]) => type === 'disconnected')[1];
  assert.deepEqual([ended.reason, ended.code], ['moved to us-west-2', REASON_CODES.moved]);
});

test("a redirect with the Regions' endpoints known goes to the other Region at once", async (t) => {
  const { all, endpoints } = withRegions(t, { backoff: { baseMs: 60000, capMs: 60000, floorMs: 60000, jitter: false } });
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  all[0].deliver(state('us-east-1'));
  all[0].deliver({ type: 'error', code: 'no_quorum', message: 'cut off', region: 'us-east-1' });
  // A minute's backoff is configured: only an immediate reconnect gets here in time.
  await until(() => all.length === 2, 'the other Region, at once');
  assert.match(all[1].url, /^wss:\/\/usw2\.example/);
  assert.deepEqual(endpoints.at(-1), { url: 'wss://usw2.example', regional: true, reason: "us-east-1 cannot reach its table's quorum" });
});

test("connects that keep failing move the client to a Region's own endpoint, then the next", async (t) => {
  const { all, Socket } = sockets();
  const { c } = client(Socket, { regions: REGIONS });
  const endpoints = [];
  c.addEventListener('endpoint', (e) => endpoints.push(e.detail));
  t.after(() => c.close());
  c.start();
  // Every socket fails before it opens.
  for (let i = 0; i < 4; i += 1) {
    await until(() => all.length === i + 1, `socket ${i + 1}`);
    all[i].drop();
  }
  await until(() => all.length === 5, 'socket 5');
  assert.deepEqual(all.map((s) => s.url.split('?')[0]), [
    'wss://global.example', 'wss://global.example', 'wss://use1.example', 'wss://use1.example', 'wss://usw2.example',
  ]);
  assert.deepEqual(endpoints.map((e) => [e.url, e.regional]), [['wss://use1.example', true], ['wss://usw2.example', true]]);
  assert.match(endpoints[0].reason, /2 consecutive failures/);
});

test('a client closed before its socket opens holds no timer: nothing waits on a closed client', async () => {
  const { all, Socket } = sockets();
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const before = timers();
  const c = new AuctionClient({ url: 'wss://global.example', WebSocket: Socket, tokenProvider: () => 'token', connectTimeoutMs: 60_000 });
  c.start();
  await until(() => all.length === 1, 'a socket');
  assert.ok(timers() > before, 'the connect timeout waits');
  // The socket never calls back (a transport that drops its close event).
  c.close();
  assert.equal(timers(), before);
});

/** A client serving from us-west-2's own endpoint after us-east-1 lost its quorum. */
async function onFallback(t) {
  const { all, c, events, endpoints } = withRegions(t);
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  all[0].deliver(state('us-east-1'));
  // On the global name: nothing to probe.
  await c.probeGlobal();
  assert.equal(all.length, 1);
  all[0].deliver({ type: 'error', code: 'no_quorum', message: 'cut off', region: 'us-east-1' });
  await until(() => all.length === 2, 'the other Region');
  all[1].open();
  all[1].deliver(state('us-west-2'));
  endpoints.length = 0;
  /** One probe of the global name, answered by `answer(socket)`. */
  const probe = async (answer) => {
    const n = all.length;
    const probing = c.probeGlobal();
    await until(() => all.length === n + 1, 'a probe socket');
    const socket = all[n];
    assert.match(socket.url, /^wss:\/\/global\.example/);
    // One probe at a time.
    await c.probeGlobal();
    assert.equal(all.length, n + 1);
    socket.open();
    assert.deepEqual(socket.sent, [{ action: 'heartbeat' }]);
    answer(socket);
    await probing;
    assert.equal(socket.closedWith?.code, 1000, 'the probe socket is closed');
  };
  return { all, c, events, endpoints, probe };
}

test('a probe of the global name that leads to the serving Region adopts the global name, the session kept', async (t) => {
  const { all, events, endpoints, probe } = await onFallback(t);
  await probe((s) => s.deliver({ type: 'pong', region: 'us-west-2' }));
  assert.deepEqual(endpoints, [{ url: 'wss://global.example', regional: false, reason: 'the global name leads to this Region again' }]);
  assert.equal(all.length, 3, 'no new session');
  assert.equal(events.filter(([type]) => type === 'disconnected').length, 1, 'only the redirect ended a session');
});

test('the global name is returned to after a streak of healthy probes; a failed probe restarts the streak', async (t) => {
  const { all, events, endpoints, probe } = await onFallback(t);
  const healthy = (s) => s.deliver({ type: 'pong', region: 'us-east-1' });
  await probe(healthy);
  await probe(healthy);
  // A probe that fails (a dropped socket, a frame that is not a pong, or unreadable) resets it.
  await probe((s) => s.drop());
  await probe((s) => s.deliver('not json'));
  // A Region that answers, but not with a pong, is no healthy probe (last: a streak it began
  // would make the next two enough).
  await probe((s) => s.deliver({ type: 'error', code: 'x', region: 'us-east-1' }));
  await probe(healthy);
  await probe(healthy);
  assert.deepEqual(endpoints, [], 'two healthy probes in a row are not enough');
  const sessions = all.length;
  await probe(healthy);
  assert.deepEqual(endpoints, [{ url: 'wss://global.example', regional: false, reason: 'the global name has been healthy long enough' }]);
  const ended = events.filter(([type]) => type === 'disconnected').at(-1)[1];
  assert.deepEqual([ended.reason, ended.code], ['returning to the global name', REASON_CODES.returning]);
  await until(() => all.length === sessions + 1, 'a session on the global name');
  assert.match(all.at(-1).url, /^wss:\/\/global\.example/);
});
