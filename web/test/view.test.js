// reduceView: the view an app renders (and the React hook holds), one client event at a time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { INITIAL_VIEW, reduceView } from '../wsdr-client.js';

const lot = (id, amount = null, versions = {}) => ({
  id,
  item: id,
  highBid: amount === null ? null : { bidId: `h-${id}`, bidder: 'bob', amount, at: 1 },
  bidCount: 1,
  version: 1,
  versions,
});
const fold = (events, from = INITIAL_VIEW) => events.reduce((view, [type, detail]) => reduceView(view, type, detail), from);

test('status: the region only from a connected status, the failure reason kept, the retry moment only while reconnecting', () => {
  let view = fold([['status', { state: 'connected', region: 'us-east-1', attempt: 0 }]]);
  assert.equal(view.connection, 'connected');
  assert.equal(view.region, 'us-east-1');
  view = fold([['status', { state: 'reconnecting', attempt: 3, retryAt: 1234, region: 'eu-west-1' }]], view);
  assert.deepEqual([view.connection, view.region, view.attempt, view.retryAt], ['reconnecting', 'us-east-1', 3, 1234]);
  view = fold([['status', { state: 'connecting' }]], view);
  assert.deepEqual([view.attempt, view.retryAt], [3, null], 'the attempt stays, the retry moment goes');
  view = fold([['status', { state: 'connected', attempt: 0 }]], view);
  assert.equal(view.region, 'us-east-1', 'a connected status without a region keeps the one known');
  view = fold([['status', { state: 'failed', reason: 'token denied', code: 4101 }]], view);
  assert.deepEqual([view.lastDisconnect, view.lastDisconnectCode], ['token denied', 4101]);
  view = fold([['status', { state: 'failed', reason: 'gave up' }]], view);
  assert.equal(view.lastDisconnectCode, null);
  view = fold([['status', { state: 'reconnecting', attempt: 1 }]], view);
  assert.deepEqual([view.lastDisconnect, view.lastDisconnectCode, view.retryAt], ['gave up', null, null]);
});

test('restored: the first auction is `auction`, every one is in `auctions`, `you` from the first', () => {
  let view = fold([
    ['restored', { region: 'us-west-2', auction: lot('lot-2', 200), you: { userId: 'x2' }, outageMs: 900, primary: false }],
  ]);
  assert.equal(view.auction, null);
  assert.equal(view.you.userId, 'x2', 'no `you` yet: the first one there is taken');
  assert.equal(view.outageMs, 900);
  assert.equal(view.connection, 'connected');
  assert.equal(view.region, 'us-west-2');
  view = fold([['restored', { region: 'us-west-2', auction: lot('lot-1'), you: { userId: 'x1' }, primary: true }]], view);
  assert.equal(view.auction.id, 'lot-1');
  assert.equal(view.you.userId, 'x1');
  assert.equal(view.outageMs, 900, 'no outage reported: the last one stays');
  assert.deepEqual(Object.keys(view.auctions).sort(), ['lot-1', 'lot-2']);
  view = fold([['restored', { region: 'us-east-1', auction: lot('lot-2', 250), you: { userId: 'x3' }, outageMs: 0, primary: false }]], view);
  assert.equal(view.you.userId, 'x1', 'another auction does not replace `you`');
  assert.equal(view.auctions['lot-2'].highBid.amount, 250);
  assert.equal(view.outageMs, 0);
  view = fold([['restored', { region: 'us-east-1', auction: lot('lot-1', 10), you: { userId: 'x1' } }]], view);
  assert.equal(view.auction.highBid.amount, 10, 'primary unless said otherwise');
  const noId = fold([['restored', { region: 'r', auction: null, you: null, primary: false }]], view);
  assert.deepEqual(noId.auctions, view.auctions);
});

test('update: merged into the auction it names, ignored for an auction not shown', () => {
  let view = fold([
    ['restored', { region: 'r', auction: lot('lot-1', 100), you: null, primary: true }],
    ['restored', { region: 'r', auction: lot('lot-2', 5), you: null, primary: false }],
  ]);
  const update = { auctionId: 'lot-1', highBid: { bidId: 'n', bidder: 'c', amount: 120, at: 2 }, bidCount: 2, version: 2, versions: { r: 2 } };
  view = fold([['update', update]], view);
  assert.deepEqual(
    [view.auction.highBid.amount, view.auction.bidCount, view.auction.version, view.auction.versions, view.auction.item],
    [120, 2, 2, { r: 2 }, 'lot-1'],
  );
  assert.equal(view.auctions['lot-1'].highBid.amount, 120);
  assert.equal(view.auctions['lot-2'].highBid.amount, 5);
  view = fold([['update', { ...update, auctionId: 'lot-2', bidCount: 7 }]], view);
  assert.equal(view.auctions['lot-2'].bidCount, 7);
  assert.equal(view.auction.bidCount, 2, 'the first auction untouched');
  const same = fold([['update', { ...update, auctionId: 'lot-9' }]], view);
  assert.equal(same, view, 'nothing shown of lot-9: the same view');
});

test('a bid from sent to result to settlement, or to expiry', () => {
  let view = fold([['bidSent', { bidId: 'b1', amount: 150 }]]);
  assert.deepEqual(view.bids.b1, { amount: 150, status: 'sent', reason: null, region: null, doubtful: false });
  view = fold([['bidResult', { bidId: 'b1', status: 'rejected', reason: 'too_low', region: 'r2', doubtful: true }]], view);
  assert.deepEqual(view.bids.b1, { amount: 150, status: 'rejected', reason: 'too_low', region: 'r2', doubtful: true }, 'the amount kept from the send');
  view = fold([['bidSettled', { bidId: 'b1', stands: true, region: null }]], view);
  assert.deepEqual(view.bids.b1, { amount: 150, status: 'rejected', reason: 'too_low', region: 'r2', doubtful: false, stands: true });
  view = fold([['bidSettled', { bidId: 'b1', stands: false, region: 'r3' }]], view);
  assert.equal(view.bids.b1.region, 'r3');
  // A result for a bid this view never saw sent (another tab's), with its own amount.
  view = fold([['bidResult', { bidId: 'b2', status: 'accepted', region: 'r', amount: 9, doubtful: false }]], view);
  assert.deepEqual(view.bids.b2, { amount: 9, status: 'accepted', reason: null, region: 'r', doubtful: false });
  view = fold([['bidResult', { bidId: 'b3', status: 'unknown', region: 'r', doubtful: true }]], view);
  assert.equal(view.bids.b3.amount, null);
  const unknown = fold([['bidSettled', { bidId: 'zz', stands: true }], ['bidExpired', { bidId: 'zz' }]], view);
  assert.equal(unknown, view, 'settling or expiring an unknown bid changes nothing');
  view = fold([['bidSent', { bidId: 'b4', amount: 40 }], ['bidExpired', { bidId: 'b4' }]], view);
  assert.deepEqual(view.bids.b4, { amount: 40, status: 'expired', reason: null, region: null, doubtful: false });
});

test('endpoint and disconnected are kept as told; unknown events change nothing', () => {
  let view = fold([['endpoint', { url: 'wss://r', regional: true, reason: 'failures' }]]);
  assert.deepEqual(view.endpoint, { url: 'wss://r', regional: true, reason: 'failures' });
  view = fold([['disconnected', { reason: 'heartbeat failures', code: 4001 }]], view);
  assert.deepEqual([view.lastDisconnect, view.lastDisconnectCode], ['heartbeat failures', 4001]);
  view = fold([['disconnected', { reason: 'closed' }]], view);
  assert.equal(view.lastDisconnectCode, null);
  assert.equal(reduceView(view, 'moveScheduled', { to: 'x' }), view);
});

test("topic and write events fold into a view built without topics or writes, and keep what they don't name", () => {
  const op = (opId, position) => ({ author: 'a', opId, region: 'e', position, log: 'e', at: position, digest: 'd', op: { text: opId } });
  // A view an app built by hand (the declarations make both fields optional).
  const bare = { ...INITIAL_VIEW, connection: 'reconnecting', region: 'r0', topics: undefined, writes: undefined, outageMs: null };
  const restored = reduceView(bare, 'topicRestored', { topic: 't:a', region: 'r1', versions: { e: 1 }, view: { n: 1 }, added: [op('m1', 1)], complete: true, outageMs: 7 });
  assert.equal(restored.connection, 'connected');
  assert.equal(restored.region, 'r1');
  assert.equal(restored.outageMs, 7);
  // A push of a topic not held yet: not complete, not connected by it, other topics kept.
  const pushed = reduceView(restored, 'topicUpdated', { topic: 't:b', versions: { e: 2 }, view: null });
  assert.equal(pushed.topics['t:b'].complete, false);
  assert.deepEqual(pushed.topics['t:b'].copies, [], 'a push without ops adds none');
  assert.ok(pushed.topics['t:a'], 'the other topic kept');
  assert.equal(pushed.region, 'r1', 'a push naming no Region keeps it');
  const stillDown = reduceView(bare, 'topicUpdated', { topic: 't:a', versions: {}, view: null, added: [] });
  assert.equal(stillDown.connection, 'reconnecting', 'a push connects nothing');
  assert.equal(reduceView(bare, 'discontinuity', { topic: 't:a', heldTo: {}, versions: {} }), bare);
  // Writes: each event's fields, the others' writes kept.
  const sent = reduceView(reduceView(bare, 'writeSent', { opId: 'w0', topic: 't:a', op: { text: 0 } }), 'writeSent', { opId: 'w1', topic: 't:a', op: { text: 1 } });
  assert.deepEqual(Object.keys(sent.writes).sort(), ['w0', 'w1']);
  assert.equal(sent.writes.w1.doubtful, false);
  const refused = reduceView(sent, 'writeResult', { opId: 'w1', status: 'rejected', reason: 'too_long', region: 'r1', doubtful: false });
  assert.deepEqual(refused.writes.w1, { topic: 't:a', op: { text: 1 }, status: 'rejected', reason: 'too_long', region: 'r1', doubtful: false });
  assert.ok(refused.writes.w0, 'the other write kept');
  const answeredBare = reduceView(bare, 'writeResult', { opId: 'w9', status: 'accepted', region: 'r1', doubtful: false });
  assert.equal(answeredBare.writes.w9.reason, null);
  const doubted = reduceView(sent, 'writeResult', { opId: 'w0', status: 'unknown', region: 'r1', doubtful: true });
  const settled = reduceView(doubted, 'writeSettled', { opId: 'w0', stands: true, region: 'r2' });
  assert.equal(settled.writes.w0.doubtful, false);
  assert.equal(settled.writes.w0.region, 'r2');
  assert.equal(reduceView(doubted, 'writeSettled', { opId: 'w0', stands: false, region: null }).writes.w0.region, 'r1', 'no Region named: kept');
  const expired = reduceView(doubted, 'writeExpired', { opId: 'w0' });
  assert.equal(expired.writes.w0.status, 'expired');
  assert.equal(expired.writes.w0.doubtful, false);
  for (const type of ['writeSettled', 'writeExpired']) {
    assert.equal(reduceView(sent, type, { opId: 'nobody', stands: true }), sent, `${type} of a write not held`);
    assert.equal(reduceView(bare, type, { opId: 'nobody', stands: true }), bare, `${type} on a view without writes`);
  }
});
