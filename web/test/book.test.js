// Unit tests of the browser client's bid book: uncertain bids settle, stale pushes drop.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BidBook, dominates } from '../wsdr-client.js';

const state = (bids, versions = {}) => ({
  type: 'state',
  region: 'us-west-2',
  auction: { id: 'lot-1', versions },
  you: { userId: 'alice', bids },
});

test('a replay rejected by the other Region settles as standing once a state lists it', () => {
  const book = new BidBook({ settleWindowMs: 1000 });
  book.add('b1', 'frame-b1', 150, true);
  assert.deepEqual(book.replay(), ['frame-b1']); // the reconnect replays it: second send
  const r = book.onResult({ bidId: 'b1', status: 'rejected', reason: 'too_low' }, 0);
  assert.deepEqual(r, { amount: 150, doubtful: true });
  assert.deepEqual(book.onState(state([])).settled, []);
  const { settled } = book.onState(state([{ bidId: 'b1', amount: 150, at: 1, regions: ['us-east-1'] }]));
  assert.deepEqual(settled, [{ bidId: 'b1', stands: true, region: 'us-west-2' }]);
  assert.equal(book.doubtful.size, 0);
});

test('a rejection of a bid sent once is final', () => {
  const book = new BidBook();
  book.add('b1', 'f', 150, true);
  assert.equal(book.onResult({ bidId: 'b1', status: 'rejected', reason: 'too_low' }, 0).doubtful, false);
});

test('an unknown answer is resent when a state does not list it, settled when it does', () => {
  const book = new BidBook();
  book.add('b2', 'frame-b2', 200, true);
  assert.equal(book.onResult({ bidId: 'b2', status: 'unknown' }, 0).doubtful, true);
  const { resend } = book.onState(state([]));
  assert.deepEqual(resend, ['frame-b2']);
  assert.ok(book.unconfirmed.has('b2'));
});

test('doubtful bids not seen within the window settle as not standing', () => {
  const book = new BidBook({ settleWindowMs: 1000 });
  book.add('b3', 'f', 300, true);
  book.replay();
  book.onResult({ bidId: 'b3', status: 'rejected', reason: 'auction_closed' }, 0);
  assert.deepEqual(book.expire(999), []);
  assert.deepEqual(book.expire(1000), [{ bidId: 'b3', stands: false, region: null }]);
});

test('a pushed high bid that is the doubtful bid settles it; a stale push is dropped', () => {
  const book = new BidBook();
  book.onState(state([], { 'us-east-1': 3, 'us-west-2': 2 }));
  book.add('b4', 'f', 400, true);
  book.replay();
  book.onResult({ bidId: 'b4', status: 'rejected', reason: 'too_low' }, 0);
  const stale = book.onUpdate({ region: 'us-west-2', auctionId: 'lot-1', versions: { 'us-east-1': 2, 'us-west-2': 2 }, highBid: null });
  assert.equal(stale.stale, true);
  const fresh = book.onUpdate({
    region: 'us-west-2',
    auctionId: 'lot-1',
    versions: { 'us-east-1': 4, 'us-west-2': 2 },
    highBid: { bidId: 'b4', bidder: 'alice', amount: 400, at: 5 },
  });
  assert.equal(fresh.stale, false);
  assert.deepEqual(fresh.settled, [{ bidId: 'b4', stands: true, region: 'us-west-2' }]);
  assert.equal(fresh.view.highBid.amount, 400);
});

test('incomparable pushes merge element-wise: a late push never shows a lower high bid', () => {
  const book = new BidBook();
  book.onState(state([], { A: 1, B: 1 }));
  // {A:1,B:2} with high 700 arrives first; the local push {A:2,B:1} with 600 (read before it) after.
  const first = book.onUpdate({ region: 'B', versions: { A: 1, B: 2 }, highBid: { bidId: 'x7', bidder: 'bob', amount: 700, at: 9 } });
  assert.equal(first.view.highBid.amount, 700);
  const late = book.onUpdate({ region: 'A', versions: { A: 2, B: 1 }, highBid: { bidId: 'x6', bidder: 'carol', amount: 600, at: 8 } });
  assert.equal(late.stale, false, 'it adds A:2');
  assert.deepEqual(late.view.versions, { A: 2, B: 2 });
  assert.equal(late.view.highBid.amount, 700, 'the higher bid stays');
  assert.equal(late.view.bidCount, 4);
  assert.equal(book.onUpdate({ region: 'A', versions: { A: 2, B: 1 }, highBid: null }).stale, true);
});

test('a pong whose versions the view does not dominate asks for a resync naming the doubtful bids', () => {
  const book = new BidBook();
  book.onState(state([], { A: 3 }));
  assert.equal(book.behind({ A: 3 }, 'lot-1'), false);
  assert.equal(book.behind({ A: 3, B: 1 }, 'lot-1'), true);
  book.add('b1', 'f1', 100, true);
  book.replay();
  book.onResult({ bidId: 'b1', status: 'unknown', reason: 'unavailable' }, 0);
  assert.deepEqual(JSON.parse(book.stateRequest('lot-1')), { action: 'getState', auctionId: 'lot-1', bidIds: ['b1'] });
  assert.deepEqual(JSON.parse(new BidBook().stateRequest('lot-1')), { action: 'getState', auctionId: 'lot-1' });
});

test('a bid named in you.settled settles however long the user\'s bid list is', () => {
  const book = new BidBook();
  book.add('b1', 'f1', 100, true);
  book.replay();
  book.onResult({ bidId: 'b1', status: 'unknown' }, 0);
  const frame = state([], { A: 1 });
  frame.you.settled = [{ bidId: 'b1', stands: true, amount: 100, regions: ['A'] }];
  const { settled, resend } = book.onState(frame);
  assert.deepEqual(settled.map((s) => [s.bidId, s.stands]), [['b1', true]]);
  assert.deepEqual(resend, []);
});

test('a bidId whose copies disagree settles by the copy with the amount sent, not by a first copy', () => {
  const book = new BidBook();
  book.add('b3', 'f3', 300, true);
  book.replay();
  book.onResult({ bidId: 'b3', status: 'unknown' }, 0);
  const frame = state([], { A: 1 });
  // The bidId reused in a split: 200 accepted in A, 300 in B; no single `amount`.
  frame.you.settled = [{ bidId: 'b3', stands: true, regions: ['A', 'B'], copies: [{ region: 'A', amount: 200 }, { region: 'B', amount: 300 }] }];
  const { settled, resend } = book.onState(frame);
  assert.deepEqual(settled.map((s) => [s.bidId, s.stands]), [['b3', true]]);
  assert.deepEqual(resend, []);
  const other = new BidBook();
  other.add('b3', 'f3', 250, true);
  other.replay();
  other.onResult({ bidId: 'b3', status: 'unknown' }, 0);
  assert.deepEqual(other.onState(frame).resend, ['f3'], 'neither copy is the 250 sent: not standing here');
});

test('an unknown/unavailable answer is never final: not standing, it is sent again', () => {
  const book = new BidBook();
  book.add('b2', 'f2', 100, true);
  book.replay();
  assert.equal(book.onResult({ bidId: 'b2', status: 'unknown', reason: 'unavailable' }, 0).doubtful, true);
  const frame = state([], { A: 1 });
  frame.you.settled = [{ bidId: 'b2', stands: false }];
  assert.deepEqual(book.onState(frame).resend, ['f2']);
});

test('dominates compares version vectors per Region', () => {
  assert.ok(dominates({ a: 2, b: 1 }, { a: 1 }));
  assert.ok(!dominates({ a: 2 }, { a: 1, b: 1 }));
  assert.ok(dominates({}, {}));
});

test('a redirect decides nothing: the bid stays unconfirmed and goes out again on the next session', () => {
  const book = new BidBook();
  book.add('b9', '{"action":"bid"}', 500, true);
  const r = book.onResult({ bidId: 'b9', status: 'redirect', reason: 'no_quorum', region: 'us-east-1' }, 0);
  assert.equal(r.doubtful, false);
  assert.equal(r.amount, 500);
  assert.deepEqual(book.replay(), ['{"action":"bid"}']);
  // Its answer in the other Region settles it as usual.
  assert.equal(book.onResult({ bidId: 'b9', status: 'duplicate' }, 0).doubtful, false);
  assert.deepEqual(book.replay(), []);
});

test('several auctions share one book: versions, high bids and doubtful bids stay per auction', () => {
  const book = new BidBook();
  const stateOf = (id, versions, bids = []) => ({ ...state(bids, versions), auction: { id, versions } });
  book.onState(stateOf('lot-1', { A: 3 }));
  book.onState(stateOf('lot-2', { A: 1 }));
  assert.equal(book.behind({ A: 3 }, 'lot-1'), false);
  assert.equal(book.behind({ A: 3 }, 'lot-2'), true, "lot-1's versions say nothing of lot-2");
  assert.equal(book.behind({ A: 1 }, 'lot-3'), true, 'an auction with no state yet is behind');
  // A push of lot-2 is not stale because lot-1 is ahead, and leaves lot-1 as it was.
  const push = book.onUpdate({ region: 'A', auctionId: 'lot-2', versions: { A: 2 }, highBid: { bidId: 'x', bidder: 'bob', amount: 50, at: 1 } });
  assert.equal(push.stale, false);
  assert.deepEqual(book.known('lot-1').versions, { A: 3 });
  assert.deepEqual(book.known('lot-2').versions, { A: 2 });
  // A doubtful bid in lot-2: named in lot-2's getState only, untouched by lot-1's state.
  const frame = JSON.stringify({ action: 'bid', auctionId: 'lot-2', amount: 70, bidId: 'b7' });
  book.add('b7', frame, 70, true);
  book.onResult({ bidId: 'b7', status: 'unknown' }, 0);
  assert.deepEqual(JSON.parse(book.stateRequest('lot-1')), { action: 'getState', auctionId: 'lot-1' });
  assert.deepEqual(JSON.parse(book.stateRequest('lot-2')).bidIds, ['b7']);
  assert.deepEqual(book.doubtfulAuctions(), ['lot-2']);
  assert.deepEqual(book.onState(stateOf('lot-1', { A: 3 })).resend, [], "lot-1's state does not list lot-2's bids");
  assert.ok(book.doubtful.has('b7'));
  assert.deepEqual(book.onState(stateOf('lot-2', { A: 2 })).resend, [frame], 'its own state does');
});

test('BidBook: a replay rejected as bid_id_reused is final; the settle read names at most 32 bids', () => {
  const book = new BidBook();
  book.add('b1', 'f1', 100, true, 0, 'lot-1');
  book.replay();
  assert.deepEqual(book.onResult({ bidId: 'b1', status: 'rejected', reason: 'bid_id_reused' }, 0), { amount: 100, doubtful: false });
  assert.deepEqual(book.onResult({ bidId: 'nope', status: 'accepted' }, 0), { amount: null, doubtful: false });
  for (let i = 0; i < 40; i += 1) {
    book.add(`d${i}`, 'f', 10 + i, true, 0, 'lot-1');
    book.onResult({ bidId: `d${i}`, status: 'unknown' }, 0);
  }
  const named = JSON.parse(book.stateRequest('lot-1')).bidIds;
  assert.equal(named.length, 32);
  assert.deepEqual(named.slice(0, 2), ['d0', 'd1'], 'the oldest doubts first');
  assert.deepEqual(JSON.parse(book.stateRequest('lot-2')), { action: 'getState', auctionId: 'lot-2' });
  assert.deepEqual(book.doubtfulAuctions(), ['lot-1']);
});

test('BidBook: a state without `you`, or settling nothing, settles nothing and throws nothing', () => {
  const book = new BidBook();
  book.add('b1', 'f1', 100, true, 0, 'lot-1');
  book.onResult({ bidId: 'b1', status: 'unknown' }, 0);
  const r = book.onState({ type: 'state', region: 'r', auction: { id: 'lot-1', versions: {} } });
  assert.deepEqual(r, { settled: [], resend: ['f1'] });
  // A copy whose amount is no integer stands for no bid (its digest has no canonical form).
  book.onResult({ bidId: 'b1', status: 'unknown' }, 0);
  const odd = book.onState({ type: 'state', region: 'r', auction: { id: 'lot-1', versions: {} }, you: { userId: 'alice', bids: [{ bidId: 'b1', amount: 100.5 }] } });
  assert.deepEqual(odd.settled, []);
});

test("BidBook: a push settles only the user's own doubtful bid, and nothing when it shows none", () => {
  const book = new BidBook();
  book.onState({ type: 'state', region: 'r', auction: { id: 'lot-1', versions: { r: 1 } }, you: { userId: 'alice', bids: [] } });
  book.add('b1', 'f1', 500, true, 0, 'lot-1');
  book.onResult({ bidId: 'b1', status: 'unknown' }, 0);
  const none = book.onUpdate({ region: 'r', auctionId: 'lot-1', versions: { r: 2 }, highBid: null });
  assert.deepEqual(none.settled, []);
  const theirs = book.onUpdate({ region: 'r', auctionId: 'lot-1', versions: { r: 3 }, highBid: { bidId: 'b1', bidder: 'mallory', amount: 500, at: 1 } });
  assert.deepEqual(theirs.settled, [], "the same bidId and amount, another bidder's");
  const odd = book.onUpdate({ region: 'r', auctionId: 'lot-1', versions: { r: 4 }, highBid: { bidId: 'b1', bidder: 'alice', amount: 500.5, at: 1 } });
  assert.deepEqual(odd.settled, []);
  const mine = book.onUpdate({ region: 'r', auctionId: 'lot-1', versions: { r: 5 }, highBid: { bidId: 'b1', bidder: 'alice', amount: 501, at: 2 } });
  assert.deepEqual(mine.settled, [], 'my bidId with another amount');
  assert.equal(book.doubtful.size, 1);
});
