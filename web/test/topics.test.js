// A topic of any app (a chat room) in the browser client: the log's frontier and holes
// (`TopicLog`, the Rust client's rules), and a session that reads from its positions, asks for
// a hole then reports it once, and replays and settles its writes by digest.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AuctionClient, TopicLog, opDigest, reduceView, INITIAL_VIEW } from '../wsdr-client.js';
import { sockets, until } from './sockets.js';

const copy = (author, opId, log, position, text) => ({
  author,
  opId,
  region: log,
  position,
  log,
  at: position,
  digest: opDigest({ text }),
  op: { text },
});

test('the frontier stops at the first hole of each log, and a copy held twice is held once', () => {
  const log = new TopicLog('chat:lobby');
  assert.equal(log.request(), JSON.stringify({ action: 'getState', topic: 'chat:lobby' }));
  const first = log.merge({ e: 4, w: 1 }, { title: 'Lobby' }, [copy('a', 'm1', 'e', 1, 'x'), copy('a', 'm2', 'e', 2, 'x'), copy('a', 'm4', 'e', 4, 'x'), copy('b', 'n1', 'w', 1, 'y')]);
  assert.equal(first.added.length, 4);
  assert.equal(first.behind, true);
  assert.deepEqual(log.frontier(), { e: 2, w: 1 });
  const again = log.merge({ e: 3 }, null, [copy('a', 'm2', 'e', 2, 'x'), copy('a', 'm3', 'e', 3, 'x')]);
  assert.deepEqual(again.added.map((op) => op.opId), ['m3']);
  assert.equal(again.behind, false);
  assert.deepEqual(log.versions, { e: 4, w: 1 }, 'counts only grow');
  assert.equal(log.isBehind({ w: 2 }), true);
  assert.equal(log.isBehind({ e: 4 }), false);
  assert.deepEqual(JSON.parse(log.request(['m9'])), { action: 'getState', topic: 'chat:lobby', opIds: ['m9'], since: { e: 4, w: 1 } });
});

test('a hole that stays is reported once and asked for again when the counts move', () => {
  const log = new TopicLog('chat:lobby');
  const first = log.merge({ e: 3 }, null, [copy('a', 'm1', 'e', 1, 'x'), copy('a', 'm3', 'e', 3, 'x')]);
  assert.equal(log.answered(first, false), 'again');
  const nothing = log.merge({ e: 3 }, null, []);
  assert.deepEqual(log.answered(nothing, false), { hole: { e: 1 } });
  assert.equal(log.worthAsking(), false);
  assert.equal(log.answered(nothing, false), 'done', 'reported once');
  log.counted({ e: 4 });
  assert.equal(log.worthAsking(), true);
  assert.equal(log.answered(log.merge({ e: 4 }, null, [copy('a', 'm2', 'e', 2, 'x')]), true), 'done');
});

test('a stuck hole is not asked for nor reported again as another log moves', () => {
  const log = new TopicLog('chat:lobby');
  // w's log has a hole at 2 (its Region lost for good, say); e's is whole.
  const first = log.merge({ e: 1, w: 3 }, null, [copy('a', 'm1', 'e', 1, 'x'), copy('b', 'n1', 'w', 1, 'y'), copy('b', 'n3', 'w', 3, 'y')]);
  assert.equal(log.answered(first, false), 'again');
  assert.deepEqual(log.answered(log.merge({ e: 1, w: 3 }, null, []), false), { hole: { e: 1, w: 1 } });
  assert.deepEqual(log.holes(), { w: [1, 3] });
  for (let position = 2; position < 5; position += 1) {
    const push = log.merge({ e: position, w: 3 }, null, [copy('a', `m${position}`, 'e', position, 'x')]);
    assert.equal(push.behind, true, 'w is still behind');
    assert.equal(log.worthAsking(), false, "e's copies do not move w's hole");
    assert.equal(log.answered({ added: [] }, false), 'done');
  }
  // A copy held past a count (its count never arrived) is a hole's edge too.
  const past = new TopicLog('chat:lobby');
  past.merge({ w: 1 }, null, [copy('b', 'n3', 'w', 3, 'y')]);
  assert.deepEqual(past.holes(), { w: [0, 1] });
  // Each alone makes a hole: a count past the frontier with nothing held past it ...
  const counted = new TopicLog('chat:lobby');
  counted.merge({ w: 2 }, null, [copy('b', 'n1', 'w', 1, 'y')]);
  assert.deepEqual(counted.holes(), { w: [1, 2] });
  // ... and a copy held past a frontier the count does not pass.
  const ahead = new TopicLog('chat:lobby');
  ahead.merge({ w: 1 }, null, [copy('b', 'n1', 'w', 1, 'y'), copy('b', 'n3', 'w', 3, 'y')]);
  assert.deepEqual(ahead.holes(), { w: [1, 1] });
  // A log whole up to its count has none.
  const whole = new TopicLog('chat:lobby');
  whole.merge({ w: 1 }, null, [copy('b', 'n1', 'w', 1, 'y')]);
  assert.deepEqual(whole.holes(), {});
});

function roomClient(Socket) {
  const c = new AuctionClient({
    url: 'wss://global.example',
    topics: ['chat:lobby'],
    WebSocket: Socket,
    tokenProvider: () => 'token',
    backoff: { baseMs: 1, capMs: 1, floorMs: 0, jitter: false, herdWindowMs: 0 },
  });
  const events = [];
  for (const type of ['topicRestored', 'topicUpdated', 'discontinuity', 'writeResult', 'writeSettled']) {
    c.addEventListener(type, (e) => events.push([type, e.detail]));
  }
  return { c, events };
}

const roomState = (versions, ops, complete, you = { userId: 'bo', ops: [] }) => ({
  type: 'topicState',
  region: 'us-east-1',
  topic: 'chat:lobby',
  versions,
  view: { title: 'Lobby' },
  ops,
  complete,
  you,
});

test('a room is read from its positions, a hole asked for then reported once, and shown in the view', async (t) => {
  const { all, Socket } = sockets();
  const { c, events } = roomClient(Socket);
  t.after(() => c.close());
  c.start();
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  assert.deepEqual(all[0].sent, [{ action: 'getState', topic: 'chat:lobby' }]);
  all[0].deliver(roomState({ 'us-east-1': 3 }, [copy('ann', 'm1', 'us-east-1', 1, 'one'), copy('ann', 'm3', 'us-east-1', 3, 'three')], false));
  assert.deepEqual(all[0].frames('getState').at(-1), { action: 'getState', topic: 'chat:lobby', since: { 'us-east-1': 1 } });
  const asked = all[0].frames('getState').length;
  all[0].deliver(roomState({ 'us-east-1': 3 }, [], false));
  all[0].deliver(roomState({ 'us-east-1': 3 }, [], false));
  assert.equal(all[0].frames('getState').length, asked, 'not asked again');
  assert.equal(events.filter(([type]) => type === 'discontinuity').length, 1);
  const room = c.state.topics['chat:lobby'];
  assert.deepEqual(room.copies.map((op) => op.opId), ['m1', 'm3']);
  assert.deepEqual(room.hole, { heldTo: { 'us-east-1': 1 }, versions: { 'us-east-1': 3 } });
  assert.deepEqual(room.view, { title: 'Lobby' });
  // A pong that counts more asks from the hole; a push fills it.
  all[0].deliver({ type: 'pong', region: 'us-east-1', ts: 1, topic: 'chat:lobby', versions: { 'us-east-1': 4 } });
  assert.equal(all[0].frames('getState').length, asked + 1);
  all[0].deliver({ type: 'topicUpdate', region: 'us-east-1', topic: 'chat:lobby', versions: { 'us-east-1': 4 }, view: { title: 'Lobby' }, ops: [copy('ann', 'm2', 'us-east-1', 2, 'two'), copy('ann', 'm4', 'us-east-1', 4, 'four')] });
  assert.deepEqual(c.state.topics['chat:lobby'].copies.map((op) => op.opId), ['m1', 'm3', 'm2', 'm4']);
  assert.equal(events.filter(([type]) => type === 'topicUpdated').length, 1);
});

test('a write is replayed with its op id and settles on a copy of its own payload only', async (t) => {
  const { all, Socket } = sockets();
  const { c, events } = roomClient(Socket);
  t.after(() => c.close());
  c.start();
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  all[0].deliver(roomState({}, [], true));
  const opId = c.write('chat:lobby', { text: 'hi' });
  const frame = { action: 'write', topic: 'chat:lobby', opId, op: { text: 'hi' } };
  assert.deepEqual(all[0].frames('write'), [frame]);
  assert.throws(() => c.write('chat:lobby', { x: 0.5 }), 'no canonical form');
  assert.equal(c.state.writes[opId].status, 'sent');
  all[0].drop();
  await until(() => all.length === 2, 'a second socket');
  all[1].open();
  assert.deepEqual(all[1].frames('write'), [frame], 'replayed, same op id');
  all[1].deliver({ type: 'writeResult', opId, status: 'unknown', reason: null, region: 'us-east-1' });
  assert.equal(c.state.writes[opId].doubtful, true);
  // A copy of the op id with another payload is not this write: sent again.
  all[1].deliver(roomState({ 'us-east-1': 1 }, [copy('bo', opId, 'us-east-1', 1, 'other')], true));
  assert.equal(all[1].frames('write').length, 2);
  assert.equal(events.filter(([type]) => type === 'writeSettled').length, 0);
  all[1].deliver({ type: 'writeResult', opId, status: 'unknown', reason: null, region: 'us-east-1' });
  all[1].deliver(roomState({ 'us-east-1': 2 }, [], true, { userId: 'bo', ops: [], settled: [{ opId, stands: true, copies: [{ region: 'us-east-1', digest: opDigest({ text: 'hi' }) }] }] }));
  assert.deepEqual(events.find(([type]) => type === 'writeSettled')[1], { opId, stands: true, region: 'us-east-1' });
  assert.equal(c.state.writes[opId].stands, true);
});

test('the view folds topic events and leaves the auction alone', () => {
  const restored = reduceView(INITIAL_VIEW, 'topicRestored', { topic: 'chat:lobby', region: 'us-east-1', versions: { e: 1 }, view: { title: 'L' }, added: [copy('a', 'm1', 'e', 1, 'x')], complete: true, outageMs: null });
  assert.equal(restored.connection, 'connected');
  assert.equal(restored.auction, null);
  const pushed = reduceView(restored, 'topicUpdated', { topic: 'chat:lobby', region: 'us-east-1', versions: { e: 2 }, view: { title: 'L' }, added: [copy('a', 'm1', 'e', 1, 'x'), copy('a', 'm2', 'e', 2, 'x')] });
  assert.deepEqual(pushed.topics['chat:lobby'].copies.map((op) => op.opId), ['m1', 'm2'], 'a copy held once');
  assert.equal(pushed.topics['chat:lobby'].complete, true);
  assert.equal(reduceView(pushed, 'discontinuity', { topic: 'chat:other' }), pushed, 'a topic not held');
});

test('joining: a bad topic is refused, a second join sends nothing, a join while connected reads at once', async (t) => {
  const { all, Socket } = sockets();
  const { c } = roomClient(Socket);
  t.after(() => c.close());
  assert.throws(() => c.join('lobby'), /topic must be/);
  assert.throws(() => c.join(7), /topic must be/);
  assert.throws(() => c.join(':lobby'), /topic must be/);
  c.start();
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  c.join('chat:general');
  c.join('chat:general');
  assert.deepEqual(all[0].frames('getState').filter((f) => f.topic === 'chat:general'), [{ action: 'getState', topic: 'chat:general' }], 'asked once, at once');
  // A frame for a topic never joined changes nothing.
  all[0].deliver({ ...roomState({ e: 1 }, [copy('a', 'm1', 'e', 1, 'x')], true), topic: 'chat:nobody' });
  all[0].deliver({ type: 'topicUpdate', region: 'us-east-1', topic: 'chat:nobody', versions: { e: 1 }, view: null, ops: [copy('a', 'm1', 'e', 1, 'x')] });
  assert.equal(c.state.topics?.['chat:nobody'], undefined);
});

test("a session's first topic state reports the outage, a resync within it none; a push adding nothing is silent", async (t) => {
  const { all, Socket } = sockets();
  const { c, events } = roomClient(Socket);
  t.after(() => c.close());
  c.start();
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  all[0].deliver(roomState({ e: 1 }, [copy('a', 'm1', 'e', 1, 'x')], true));
  assert.equal(events.at(-1)[1].outageMs, null, 'no outage before the first session');
  all[0].drop();
  await until(() => all.length === 2, 'a second socket');
  all[1].open();
  all[1].deliver(roomState({ e: 1 }, [], true));
  const first = events.filter(([type]) => type === 'topicRestored').at(-1)[1];
  assert.ok(first.outageMs >= 0 && first.outageMs < 60000, `the outage the session ended, in ms: ${first.outageMs}`);
  all[1].deliver(roomState({ e: 1 }, [], true));
  assert.equal(events.filter(([type]) => type === 'topicRestored').at(-1)[1].outageMs, null, 'a resync reports none');
  const updates = events.filter(([type]) => type === 'topicUpdated').length;
  all[1].deliver({ type: 'topicUpdate', region: 'us-east-1', topic: 'chat:lobby', versions: { e: 1 }, view: null, ops: [copy('a', 'm1', 'e', 1, 'x')] });
  assert.equal(events.filter(([type]) => type === 'topicUpdated').length, updates, 'nothing new: no event');
  // A pong whose counts the client holds asks nothing.
  const asked = all[1].frames('getState').length;
  all[1].deliver({ type: 'pong', region: 'us-east-1', ts: 1, topic: 'chat:lobby', versions: { e: 1 } });
  assert.equal(all[1].frames('getState').length, asked);
});

test('a write made offline waits, and is dropped unsent once too old; a redirect answer moves the write elsewhere', async (t) => {
  const { all, Socket } = sockets();
  const c = new AuctionClient({
    url: 'wss://global.example',
    regions: [{ region: 'us-east-1', url: 'wss://use1.example' }, { region: 'us-west-2', url: 'wss://usw2.example' }],
    topics: ['chat:lobby'],
    WebSocket: Socket,
    tokenProvider: () => 'token',
    backoff: { baseMs: 1, capMs: 1, floorMs: 0, jitter: false, herdWindowMs: 0 },
    offlineBids: { max: 4, maxAgeMs: 1 },
  });
  const events = [];
  for (const type of ['writeSent', 'writeExpired', 'writeResult', 'endpoint']) c.addEventListener(type, (e) => events.push([type, e.detail]));
  t.after(() => c.close());
  const opId = c.write('chat:lobby', { text: 'offline' });
  assert.equal(events[0][0], 'writeSent');
  assert.equal(c.state.writes[opId].status, 'sent');
  await new Promise((resolve) => setTimeout(resolve, 5));
  c.start();
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  assert.deepEqual(all[0].frames('write'), [], 'too old: never sent');
  assert.deepEqual(events.find(([type]) => type === 'writeExpired')[1], { opId });
  assert.equal(c.state.writes[opId].status, 'expired');
  const next = c.write('chat:lobby', { text: 'online' });
  assert.equal(all[0].frames('write').length, 1);
  all[0].deliver({ type: 'writeResult', opId: next, status: 'redirect', reason: 'no_quorum', region: 'us-east-1' });
  assert.ok(events.some(([type, d]) => type === 'endpoint' && d.regional), 'moved to another Region');
  await until(() => all.length === 2, 'a socket elsewhere');
  all[1].open();
  assert.deepEqual(all[1].frames('write').map((f) => f.opId), [next], 'the write goes with the client');
});
