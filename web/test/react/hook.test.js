// The React hook (web/react.js) on the real client, rendered by the small React beside this
// file (fake-react.js; the browser test runs it on React itself): the client's every event
// folded into what a component renders, topics joined before and after the client exists,
// writes, the idle hook, and `useTopic` under its provider.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { register } from 'node:module';
import { sockets, settle, until } from '../sockets.js';

register('./loader.js', import.meta.url);
const React = await import('./fake-react.js');
const { WsdrProvider, useWsdr, useTopic, useAuction, reduce } = await import('../../react.js');
const { AuctionClient, INITIAL_VIEW, opDigest } = await import('../../wsdr-client.js');

// The clients the hook makes, as they start.
const started = [];
const start = AuctionClient.prototype.start;
AuctionClient.prototype.start = function startAndRecord() {
  started.push(this);
  return start.call(this);
};

const options = (Socket, extra = {}) => ({
  url: 'wss://global.example',
  WebSocket: Socket,
  tokenProvider: () => 'token',
  backoff: { baseMs: 1, capMs: 1, floorMs: 0, jitter: false, herdWindowMs: 0 },
  ...extra,
});

/** A component that renders nothing and keeps what its hook returned last. */
function probe(useHook) {
  const seen = { value: null };
  function Probe(props) {
    seen.value = useHook(props);
    return null;
  }
  return { seen, Probe };
}

const op = (opId, position) => ({ author: 'bo', opId, region: 'e', position, log: 'e', at: position, digest: opDigest({ text: opId }), op: { text: opId } });

test('every event the client emits is folded into what the component renders', async (t) => {
  const { Socket } = sockets();
  const { seen, Probe } = probe((props) => useWsdr(props.options));
  const root = React.render(React.createElement(Probe, { options: options(Socket, { auctionId: 'a1' }) }));
  t.after(() => root.unmount());
  await settle();
  const client = started.at(-1);
  assert.ok(client, 'the hook made a client and started it');
  const steps = [
    ['status', { state: 'reconnecting', attempt: 2, retryAt: 5 }],
    ['restored', { region: 'r1', auction: { id: 'a1', highBid: null, bidCount: 0 }, you: { userId: 'bo', bids: [] }, outageMs: 10 }],
    ['update', { auctionId: 'a1', highBid: { amount: 5 }, bidCount: 1, version: 1, versions: { r1: 1 } }],
    ['bidSent', { bidId: 'b1', amount: 5 }],
    ['bidResult', { bidId: 'b1', status: 'unknown', region: 'r1', doubtful: true }],
    ['bidSettled', { bidId: 'b1', stands: true, region: 'r1' }],
    ['bidSent', { bidId: 'b2', amount: 6 }],
    ['bidExpired', { bidId: 'b2' }],
    ['endpoint', { url: 'wss://r2.example', region: 'r2' }],
    ['disconnected', { reason: 'gone', code: 4001 }],
    ['topicRestored', { topic: 'chat:lobby', region: 'r1', versions: { e: 1 }, view: { title: 'L' }, added: [op('m1', 1)], complete: true, outageMs: null }],
    ['topicUpdated', { topic: 'chat:lobby', region: 'r1', versions: { e: 2 }, view: { title: 'L' }, added: [op('m2', 2)] }],
    ['discontinuity', { topic: 'chat:lobby', heldTo: { e: 2 }, versions: { e: 4 } }],
    ['writeSent', { opId: 'w1', topic: 'chat:lobby', op: { text: 'hi' } }],
    ['writeResult', { opId: 'w1', status: 'unknown', region: 'r1', doubtful: true }],
    ['writeSettled', { opId: 'w1', stands: true, region: 'r1' }],
    ['writeSent', { opId: 'w2', topic: 'chat:lobby', op: { text: 'late' } }],
    ['writeExpired', { opId: 'w2' }],
  ];
  for (const [type, detail] of steps) {
    const { bid, watch, join, write, reconnect, close, ...before } = seen.value;
    const expected = reduce(before, type, detail);
    assert.notDeepEqual(expected, before, `${type} changes the view`);
    client.dispatchEvent(new CustomEvent(type, { detail }));
    await settle();
    const { bid: _b, watch: _w, join: _j, write: _wr, reconnect: _r, close: _c, ...after } = seen.value;
    assert.deepEqual(after, expected, `${type} folded in`);
  }
  for (const name of ['bid', 'watch', 'join', 'write', 'reconnect', 'close']) {
    assert.equal(typeof seen.value[name], 'function', name);
  }
});

test('topics joined before the client exists and after are all read over its socket', async (t) => {
  const { all, Socket } = sockets();
  const lobby = probe(() => useTopic('chat:lobby'));
  const shared = probe(() => useWsdr());
  const root = React.render(
    React.createElement(WsdrProvider, { ...options(Socket), topics: ['chat:news'] }, [
      React.createElement(lobby.Probe, {}),
      React.createElement(shared.Probe, {}),
    ]),
  );
  t.after(() => root.unmount());
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  // The child's effect joined before its provider made the client: both topics are read.
  assert.deepEqual(all[0].frames('getState').map((f) => f.topic).sort(), ['chat:lobby', 'chat:news']);
  // Joined later, over the open socket, at once.
  shared.seen.value.join('chat:later');
  assert.deepEqual(all[0].frames('getState').at(-1), { action: 'getState', topic: 'chat:later' });
  const joinedAgain = shared.seen.value.join;
  await settle();
  assert.equal(shared.seen.value.join, joinedAgain, 'join keeps its identity across renders');
  // The topic's state is the provider's view of it, null until its first answer.
  assert.equal(lobby.seen.value.topic, null);
  all[0].deliver({
    type: 'topicState', region: 'us-east-1', topic: 'chat:lobby', versions: { e: 1 }, view: { title: 'Lobby' },
    ops: [op('m1', 1)], complete: true, you: { userId: 'bo', ops: [] },
  });
  await settle();
  assert.deepEqual(lobby.seen.value.topic.copies.map((c) => c.opId), ['m1']);
  assert.equal(lobby.seen.value.region, 'us-east-1');
  // `write` from useTopic writes to its topic and answers the op id.
  const opId = lobby.seen.value.write({ text: 'hi' });
  assert.equal(typeof opId, 'string');
  assert.deepEqual(all[0].frames('write'), [{ action: 'write', topic: 'chat:lobby', opId, op: { text: 'hi' } }]);
});

test('a topic prop that changes is joined, and its writes go to it', async (t) => {
  const { all, Socket } = sockets();
  const room = probe((props) => useTopic(props.topic));
  const tree = (topic) => React.createElement(WsdrProvider, options(Socket), React.createElement(room.Probe, { topic }));
  const root = React.render(tree('chat:a'));
  t.after(() => root.unmount());
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  root.update(tree('chat:b'));
  await settle();
  assert.deepEqual(all[0].frames('getState').map((f) => f.topic), ['chat:a', 'chat:b']);
  const opId = room.seen.value.write({ text: 'to b' });
  assert.equal(all[0].frames('write').at(-1).topic, 'chat:b');
  assert.equal(all[0].frames('write').at(-1).opId, opId);
});

test('an idle hook holds no client: it joins quietly, refuses writes and bids, and a write joins the next client', async (t) => {
  const { all, Socket } = sockets();
  const { seen, Probe } = probe((props) => useWsdr(props.options));
  const idle = options(Socket, { enabled: false });
  const root = React.render(React.createElement(Probe, { options: idle }));
  t.after(() => root.unmount());
  await settle();
  assert.equal(seen.value.connection, 'idle');
  assert.equal(all.length, 0);
  seen.value.join('chat:quiet');
  assert.throws(() => seen.value.write('chat:x', { text: 'no' }), /not connected/);
  assert.throws(() => seen.value.bid(5), /not connected/);
  assert.equal(seen.value.reconnect(), undefined);
  root.update(React.createElement(Probe, { options: options(Socket) }));
  await until(() => all.length === 1, 'a socket once enabled');
  all[0].open();
  assert.deepEqual(all[0].frames('getState').map((f) => f.topic), ['chat:quiet']);
  const opId = seen.value.write('chat:new', { text: 'yes' });
  assert.deepEqual(all[0].frames('write'), [{ action: 'write', topic: 'chat:new', opId, op: { text: 'yes' } }]);
  // A new client (the URL changed) joins the topic written to.
  root.update(React.createElement(Probe, { options: options(Socket, { url: 'wss://other.example' }) }));
  await until(() => all.length === 2, 'a second client');
  all[1].open();
  assert.ok(all[1].frames('getState').some((f) => f.topic === 'chat:new'), 'written to, so joined');
});

test('useTopic and useAuction need a provider above them', () => {
  for (const [hook, name] of [[() => useTopic('chat:lobby'), 'useTopic'], [() => useAuction('a1'), 'useAuction'], [() => useWsdr(), 'useWsdr']]) {
    const { Probe } = probe(hook);
    assert.throws(() => React.render(React.createElement(Probe, {})), new RegExp(`${name}\\(\\).*needs a <WsdrProvider>`));
  }
  assert.equal(INITIAL_VIEW.connection, 'connecting');
});

test("useAuction watches its auction over the provider's one socket and bids in it", async (t) => {
  const { all, Socket } = sockets();
  const lot = probe((props) => useAuction(props.auctionId));
  const tree = (auctionId) => React.createElement(WsdrProvider, options(Socket, { auctionId: 'a1' }), React.createElement(lot.Probe, { auctionId }));
  const root = React.render(tree('lot-9'));
  t.after(() => root.unmount());
  await until(() => all.length === 1, 'one socket');
  all[0].open();
  // The provider's auction and the component's, both read over the one socket.
  assert.deepEqual(all[0].frames('getState').map((f) => f.auctionId).sort(), ['a1', 'lot-9']);
  assert.equal(lot.seen.value.auction, null, 'null until its first state');
  all[0].deliver({
    type: 'state', region: 'us-east-1',
    auction: { id: 'lot-9', item: 'vase', highBid: null, bidCount: 0, version: 0, versions: {} },
    you: { userId: 'bo', lastBid: null, bids: [] },
  });
  await settle();
  assert.equal(lot.seen.value.auction?.id, 'lot-9');
  // Its bid goes to its auction, not the provider's.
  const bidId = lot.seen.value.bid(25);
  assert.deepEqual(all[0].frames('bid'), [{ action: 'bid', auctionId: 'lot-9', amount: 25, bidId }]);
  // Another auction prop is watched too, over the same socket.
  root.update(tree('lot-10'));
  await settle();
  assert.equal(all.length, 1);
  assert.equal(all[0].frames('getState').at(-1).auctionId, 'lot-10');
  lot.seen.value.bid(30);
  assert.equal(all[0].frames('bid').at(-1).auctionId, 'lot-10');
});
