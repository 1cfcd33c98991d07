// A topic's session in the browser client, rule by rule: what a topic state and a push of a
// joined topic settle, ask and report; the heartbeats' turn over auctions and topics; the
// writes' settle window, offline limits and final refusals; joining before, during and after a
// session; a chat room's order from its copies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AuctionClient, TopicLog, conversation, opDigest } from '../wsdr-client.js';
import { sockets, until } from './sockets.js';

const copy = (author, opId, log, position, text, at = position) => ({
  author, opId, region: log, position, log, at, digest: opDigest({ text }), op: { text },
});

function client(Socket, extra = {}) {
  const c = new AuctionClient({
    url: 'wss://global.example',
    topics: ['chat:lobby'],
    WebSocket: Socket,
    tokenProvider: () => 'token',
    backoff: { baseMs: 1, capMs: 1, floorMs: 0, jitter: false, herdWindowMs: 0 },
    ...extra,
  });
  const events = [];
  for (const type of ['topicRestored', 'topicUpdated', 'discontinuity', 'writeResult', 'writeSettled', 'writeExpired']) {
    c.addEventListener(type, (e) => events.push([type, e.detail]));
  }
  return { c, events };
}

const state = (versions, ops, complete, you) => ({
  type: 'topicState', region: 'us-east-1', topic: 'chat:lobby', versions, view: { title: 'Lobby' }, ops, complete,
  ...(you === undefined ? {} : { you }),
});

async function opened(Socket, extra) {
  const { all } = Socket;
  const made = client(Socket.Socket, extra);
  made.c.start();
  await until(() => all.length >= 1, 'a socket');
  all.at(-1).open();
  return made;
}

test("a doubtful write settles on the user's own copy only: from a state's ops, its own settled list, or a push", async (t) => {
  const socks = sockets();
  const { c, events } = await opened({ all: socks.all, Socket: socks.Socket });
  t.after(() => c.close());
  const ws = socks.all[0];
  // The user's id comes from the first state's `you`.
  ws.deliver(state({}, [], true, { userId: 'bo', ops: [] }));
  const opId = c.write('chat:lobby', { text: 'hi' });
  ws.deliver({ type: 'writeResult', opId, status: 'unknown', reason: null, region: 'us-east-1' });
  assert.equal(c.state.writes[opId].doubtful, true);
  // Another member's copy under the same op id and text is not this write: sent again.
  ws.deliver(state({ 'us-east-1': 1 }, [copy('cy', opId, 'us-east-1', 1, 'hi')], true, { userId: 'bo', ops: [] }));
  assert.equal(events.filter(([type]) => type === 'writeSettled').length, 0);
  assert.equal(ws.frames('write').length, 2, 'resent');
  ws.deliver({ type: 'writeResult', opId, status: 'unknown', reason: null, region: 'us-east-1' });
  // A state without `you` keeps the user the client knows.
  ws.deliver(state({ 'us-east-1': 2 }, [copy('bo', opId, 'us-east-1', 2, 'hi')], true));
  assert.deepEqual(events.find(([type]) => type === 'writeSettled')[1], { opId, stands: true, region: 'us-east-1' });
  // A push of the user's own op settles a later doubtful write.
  const later = c.write('chat:lobby', { text: 'again' });
  ws.deliver({ type: 'writeResult', opId: later, status: 'unknown', reason: null, region: 'us-east-1' });
  ws.deliver({ type: 'topicUpdate', region: 'us-east-1', topic: 'chat:lobby', versions: { 'us-east-1': 3 }, view: null, ops: [copy('cy', later, 'us-east-1', 3, 'again')] });
  assert.equal(c.state.writes[later].doubtful, true, "someone else's copy in a push settles nothing");
  ws.deliver({ type: 'topicUpdate', region: 'us-east-1', topic: 'chat:lobby', versions: { 'us-east-1': 4 }, view: { title: 'L2' }, ops: [copy('bo', later, 'us-east-1', 4, 'again')] });
  assert.deepEqual(events.filter(([type]) => type === 'writeSettled').at(-1)[1], { opId: later, stands: true, region: 'us-east-1' });
  const update = events.filter(([type]) => type === 'topicUpdated').at(-1)[1];
  assert.deepEqual(update.view, { title: 'L2' });
  assert.deepEqual(update.versions, { 'us-east-1': 4 });
  assert.equal(update.region, 'us-east-1');
  // The state's own list of the user's ops and of settled op ids settle too.
  const third = c.write('chat:lobby', { text: 'three' });
  const fourth = c.write('chat:lobby', { text: 'four' });
  ws.deliver({ type: 'writeResult', opId: third, status: 'unknown', reason: null, region: 'us-east-1' });
  ws.deliver({ type: 'writeResult', opId: fourth, status: 'unknown', reason: null, region: 'us-east-1' });
  ws.deliver(state({ 'us-east-1': 4 }, [], true, {
    userId: 'bo',
    ops: [copy('bo', third, 'us-east-1', 5, 'three')],
    settled: [{ opId: fourth, stands: true, copies: [{ region: 'us-east-1', digest: opDigest({ text: 'four' }) }] }],
  }));
  assert.equal(c.state.writes[third].stands, true);
  assert.equal(c.state.writes[fourth].stands, true);
});

test('a push behind the client asks once, a push with nothing past it asks nothing; a complete answer is complete', async (t) => {
  const socks = sockets();
  const { c, events } = await opened({ all: socks.all, Socket: socks.Socket });
  t.after(() => c.close());
  const ws = socks.all[0];
  ws.deliver(state({ e: 1 }, [copy('a', 'm1', 'e', 1, 'x')], true, { userId: 'bo', ops: [] }));
  const restored = events.filter(([type]) => type === 'topicRestored').at(-1)[1];
  assert.equal(restored.complete, true);
  assert.deepEqual(restored.versions, { e: 1 });
  const asked = () => ws.frames('getState').length;
  const before = asked();
  ws.deliver({ type: 'topicUpdate', region: 'us-east-1', topic: 'chat:lobby', versions: { e: 2 }, view: null, ops: [copy('a', 'm2', 'e', 2, 'x')] });
  assert.equal(asked(), before, 'whole up to the count: nothing to ask');
  ws.deliver({ type: 'topicUpdate', region: 'us-east-1', topic: 'chat:lobby', versions: { e: 5 }, view: null, ops: [copy('a', 'm5', 'e', 5, 'x')] });
  assert.equal(asked(), before + 1, 'positions 3 and 4 missing: asked from the frontier');
  assert.deepEqual(ws.frames('getState').at(-1).since, { e: 2 });
  // The server says its answer is complete although positions are missing: no hole.
  ws.deliver(state({ e: 5 }, [], true, { userId: 'bo', ops: [] }));
  assert.equal(events.filter(([type]) => type === 'discontinuity').length, 0);
  assert.equal(asked(), before + 1);
});

test('heartbeats name each watched auction, then each joined topic, in turn', async (t) => {
  const socks = sockets();
  const { c } = await opened({ all: socks.all, Socket: socks.Socket }, { auctionIds: ['a1'], topics: ['chat:x', 'chat:y'] });
  t.after(() => c.close());
  for (let i = 0; i < 4; i += 1) {
    c.tick();
    socks.all[0].deliver({ type: 'pong', region: 'us-east-1', ts: i });
  }
  assert.deepEqual(socks.all[0].frames('heartbeat').slice(-4), [
    { action: 'heartbeat', auctionId: 'a1' },
    { action: 'heartbeat', topic: 'chat:x' },
    { action: 'heartbeat', topic: 'chat:y' },
    { action: 'heartbeat', auctionId: 'a1' },
  ]);
  const bare = sockets();
  const { c: quiet } = await opened({ all: bare.all, Socket: bare.Socket }, { topics: [] });
  t.after(() => quiet.close());
  quiet.tick();
  assert.deepEqual(bare.all[0].frames('heartbeat').at(-1), { action: 'heartbeat' });
});

test("a doubtful write's topic is read again each heartbeat, and the write settles as not standing once its window passes", async (t) => {
  const socks = sockets();
  // A tenth of the time: 500 ms of window is 50 ms here.
  const { c, events } = await opened({ all: socks.all, Socket: socks.Socket }, { timeScale: 10, settleWindowMs: 500 });
  t.after(() => c.close());
  const ws = socks.all[0];
  ws.deliver(state({}, [], true, { userId: 'bo', ops: [] }));
  const opId = c.write('chat:lobby', { text: 'lost?' });
  ws.deliver({ type: 'writeResult', opId, status: 'unknown', reason: null, region: 'us-east-1' });
  const asked = ws.frames('getState').length;
  c.tick();
  assert.deepEqual(ws.frames('getState').slice(asked), [{ action: 'getState', topic: 'chat:lobby', opIds: [opId] }]);
  await new Promise((resolve) => setTimeout(resolve, 60));
  c.tick();
  assert.deepEqual(events.find(([type]) => type === 'writeSettled')[1], { opId, stands: false, region: null });
});

test("the writes' offline limit and age follow the options and the time scale", async (t) => {
  const socks = sockets();
  const { c, events } = client(socks.Socket, { timeScale: 10, offlineBids: { max: 1, maxAgeMs: 500 } });
  t.after(() => c.close());
  const first = c.write('chat:lobby', { text: 'one' });
  assert.throws(() => c.write('chat:lobby', { text: 'two' }), /offline: 1 writes already wait/);
  // 500 ms at a tenth: too old after 50 ms.
  await new Promise((resolve) => setTimeout(resolve, 60));
  c.start();
  await until(() => socks.all.length === 1, 'a socket');
  socks.all[0].open();
  assert.deepEqual(events.find(([type]) => type === 'writeExpired')[1], { opId: first });
});

test('a replayed write refused as a reused op id is final, not doubted', async (t) => {
  const socks = sockets();
  const { c } = await opened({ all: socks.all, Socket: socks.Socket });
  t.after(() => c.close());
  const opId = c.write('chat:lobby', { text: 'mine' });
  socks.all[0].drop();
  await until(() => socks.all.length === 2, 'a second socket');
  socks.all[1].open();
  assert.equal(socks.all[1].frames('write').length, 1, 'replayed');
  socks.all[1].deliver({ type: 'writeResult', opId, status: 'rejected', reason: 'op_id_reused', region: 'us-east-1' });
  assert.equal(c.state.writes[opId].status, 'rejected');
  assert.equal(c.state.writes[opId].doubtful, false);
  // Another refusal of a replay may hide a first send that was accepted: doubted.
  const other = c.write('chat:lobby', { text: 'long' });
  socks.all[1].drop();
  await until(() => socks.all.length === 3, 'a third socket');
  socks.all[2].open();
  socks.all[2].deliver({ type: 'writeResult', opId: other, status: 'rejected', reason: 'too_long', region: 'us-east-1' });
  assert.equal(c.state.writes[other].doubtful, true);
});

test('a topic joined before the client starts or while it reconnects is read when a session opens, once', async (t) => {
  const socks = sockets();
  const { c } = client(socks.Socket);
  t.after(() => c.close());
  c.join('chat:early');
  c.start();
  await until(() => socks.all.length === 1, 'a socket');
  c.join('chat:before-open');
  assert.deepEqual(socks.all[0].sent, [], 'nothing sent on a socket not open');
  socks.all[0].open();
  assert.deepEqual(socks.all[0].frames('getState').map((f) => f.topic).sort(), ['chat:before-open', 'chat:early', 'chat:lobby']);
  socks.all[0].drop();
  c.join('chat:while-down');
  await until(() => socks.all.length === 2, 'a second socket');
  assert.equal(socks.all[0].frames('getState').length, 3, 'not sent on the ended session');
  socks.all[1].open();
  assert.equal(socks.all[1].frames('getState').filter((f) => f.topic === 'chat:while-down').length, 1);
  assert.throws(() => c.join('!chat:lobby'), /topic must be/, 'the namespace starts the topic');
});

test("each topic's first state in a session reports the outage", async (t) => {
  const socks = sockets();
  const { c, events } = await opened({ all: socks.all, Socket: socks.Socket }, { topics: ['chat:lobby', 'chat:news'] });
  t.after(() => c.close());
  socks.all[0].drop();
  await until(() => socks.all.length === 2, 'a second socket');
  socks.all[1].open();
  socks.all[1].deliver(state({}, [], true, { userId: 'bo', ops: [] }));
  socks.all[1].deliver({ ...state({}, [], true, { userId: 'bo', ops: [] }), topic: 'chat:news' });
  const restored = events.filter(([type]) => type === 'topicRestored').map(([, d]) => [d.topic, typeof d.outageMs]);
  assert.deepEqual(restored, [['chat:lobby', 'number'], ['chat:news', 'number']]);
});

test("the topic log knows a log from its copies alone, keeps the answer's view, and reads from its frontier", () => {
  const log = new TopicLog('chat:lobby');
  log.merge({}, { title: 'L' }, [copy('a', 'm1', 'w', 1, 'x')]);
  assert.deepEqual(log.frontier(), { w: 1 }, 'a log no count names yet');
  assert.deepEqual(log.view, { title: 'L' });
  assert.deepEqual(log.merge({}, null, undefined), { added: [], behind: false }, 'an answer without ops');
  // The request names the logs in one order, whatever order they came in.
  const two = new TopicLog('chat:lobby');
  two.merge({ w: 1, e: 1 }, null, [copy('b', 'n1', 'w', 1, 'y'), copy('a', 'm1', 'e', 1, 'x')]);
  assert.equal(two.request(), '{"action":"getState","topic":"chat:lobby","since":{"e":1,"w":1}}');
  // Counts alone (nothing held yet) are read from position 0.
  const counted = new TopicLog('chat:lobby');
  counted.merge({ e: 2 }, null, []);
  assert.deepEqual(JSON.parse(counted.request()).since, { e: 0 });
  // At most 32 op ids named.
  const many = Array.from({ length: 40 }, (_, i) => `op-${i}`);
  assert.equal(JSON.parse(log.request(many)).opIds.length, 32);
});

test("a room's order keeps each message's earliest copy, and shows a copy without text as empty", () => {
  const late = { ...copy('ann', 'm1', 'e', 1, 'hi', 9) };
  const early = { ...copy('ann', 'm1', 'w', 1, 'hi', 5) };
  assert.deepEqual(conversation([early, late]).map((m) => [m.region, m.at]), [['w', 5]]);
  assert.deepEqual(conversation([late, early]).map((m) => [m.region, m.at]), [['w', 5]]);
  assert.deepEqual(conversation(undefined), []);
  const blank = { ...copy('bo', 'm2', 'e', 2, 'x'), op: {} };
  const none = { ...copy('bo', 'm3', 'e', 3, 'x'), op: undefined };
  assert.deepEqual(conversation([blank, none]).map((m) => m.text), ['', '']);
});

test('a topic must be a string: an object that prints as one is refused', async (t) => {
  const socks = sockets();
  const { c } = client(socks.Socket);
  t.after(() => c.close());
  assert.throws(() => c.join({ toString: () => 'chat:lobby' }), /topic must be/);
});
