// The op book for any app: a chat room's posts, which have no amount, no high bid and no
// order the book could lean on. Settlement is by op id and payload digest only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OpBook, opDigest, BidBook } from '../wsdr-client.js';

const post = (text) => ({ kind: 'post', text });
const frameOf = (opId, op) => JSON.stringify({ action: 'write', topic: 'chat:r1', opId, op });
const shown = (...pairs) => new Set(pairs.map(([opId, op]) => `${opId}/${opDigest(op)}`));

function bookWith(ops, options = {}) {
  const book = new OpBook({ finalReasons: ['op_id_reused'], ...options });
  for (const [opId, op, sentNow = true, now = 0] of ops) {
    book.add(opId, frameOf(opId, op), opDigest(op), sentNow, now, 'chat:r1', { text: op.text });
  }
  return book;
}

test('unanswered posts are replayed with the same frame after every reconnect', () => {
  const book = bookWith([['m1', post('hi')], ['m2', post('again')]]);
  assert.deepEqual(book.replay(), [frameOf('m1', post('hi')), frameOf('m2', post('again'))]);
  assert.deepEqual(book.replay().length, 2, 'still unanswered: replayed again');
  assert.equal(book.unconfirmed.get('m1').sends, 3);
  assert.equal(book.unconfirmed.get('m1').text, 'hi', "the app's fields ride on the entry");
  book.onResult('m1', 'accepted', null, 10);
  assert.deepEqual(book.replay(), [frameOf('m2', post('again'))]);
});

test('a rejection is final on the first send, doubtful after a replay, final again for the listed reasons', () => {
  const book = bookWith([['m1', post('a')], ['m2', post('b')], ['m3', post('c')]]);
  assert.deepEqual(book.onResult('m1', 'rejected', 'too_long', 0), { fields: { text: 'a' }, doubtful: false });
  book.replay();
  assert.equal(book.onResult('m2', 'rejected', 'not_member', 0).doubtful, true, 'the other Region may not have seen the first copy yet');
  assert.equal(book.onResult('m3', 'rejected', 'op_id_reused', 0).doubtful, false, 'the op id is taken by another payload: final');
  assert.deepEqual([...book.doubtful.keys()], ['m2']);
});

test('a redirect decides nothing: the post stays unconfirmed for the next Region', () => {
  const book = bookWith([['m1', post('a')]]);
  assert.deepEqual(book.onResult('m1', 'redirect', null, 0), { fields: { text: 'a' }, doubtful: false });
  assert.ok(book.unconfirmed.has('m1'));
  assert.deepEqual(book.onResult('nope', 'accepted', null, 0), { fields: null, doubtful: false });
  assert.deepEqual(book.onResult('nope', 'redirect', null, 0), { fields: null, doubtful: false });
});

test('a doubtful post settles only on a copy with its own digest', () => {
  const book = bookWith([['m1', post('hello')]]);
  book.onResult('m1', 'unknown', null, 5);
  // The same op id with another text is not my post standing.
  const other = book.settle('chat:r1', shown(['m1', post('HELLO')]), 'us-west-2');
  assert.deepEqual(other.settled, []);
  assert.deepEqual(other.resend, [frameOf('m1', post('hello'))], 'unknown and not shown: sent again');
  assert.equal(book.unconfirmed.get('m1').sends, 1);
  book.onResult('m1', 'unknown', null, 6);
  const mine = book.settle('chat:r1', shown(['m1', post('hello')]), 'us-west-2');
  assert.deepEqual(mine, { settled: [{ opId: 'm1', stands: true, region: 'us-west-2' }], resend: [] });
  assert.equal(book.doubtful.size, 0);
});

test("another topic's read settles nothing; a doubtful replay not shown waits for the window", () => {
  const book = bookWith([['m1', post('a')]]);
  book.replay();
  book.onResult('m1', 'rejected', 'rate_limited', 100);
  assert.deepEqual(book.doubtsOf('chat:r1'), ['m1']);
  assert.deepEqual(book.doubtsOf('chat:r2'), []);
  assert.deepEqual(book.doubtfulTopics(), ['chat:r1']);
  assert.deepEqual(book.settle('chat:r2', shown(['m1', post('a')]), 'x'), { settled: [], resend: [] });
  assert.deepEqual(book.settle('chat:r1', shown(), 'x'), { settled: [], resend: [] }, 'not unknown: no resend');
  assert.deepEqual(book.expire(100 + 119999), []);
  assert.deepEqual(book.expire(100 + 120000), [{ opId: 'm1', stands: false, region: null }]);
  assert.deepEqual(book.doubtfulTopics(), []);
});

test('a push showing my post settles its doubt, with the same payload only', () => {
  const book = bookWith([['m1', post('a')]]);
  book.onResult('m1', 'unknown', null, 0);
  assert.deepEqual(book.settleShown('m1', opDigest(post('b')), 'r'), []);
  assert.deepEqual(book.settleShown('m9', opDigest(post('a')), 'r'), []);
  assert.deepEqual(book.settleShown('m1', opDigest(post('a')), 'r'), [{ opId: 'm1', stands: true, region: 'r' }]);
  assert.deepEqual(book.settleShown('m1', opDigest(post('a')), 'r'), [], 'settled once');
});

test('posts made offline wait, at most max of them, and expire unsent past the age limit', () => {
  const book = new OpBook({ offline: { max: 2, maxAgeMs: 1000 } });
  book.add('m1', 'f1', 'd1', false, 0);
  book.add('m2', 'f2', 'd2', false, 500);
  assert.throws(() => book.add('m3', 'f3', 'd3', false, 600), /2 writes already wait/);
  book.add('m4', 'f4', 'd4', true, 600); // sent at once: not queued, not limited
  assert.equal(book.queued(), 2);
  assert.deepEqual(book.expireOffline(1500), ['m1'], 'an age equal to the limit is still sent');
  assert.deepEqual(book.replay(), ['f2', 'f4']);
  assert.deepEqual(book.expireOffline(99999), [], 'a post sent once never expires offline');
});

test("the auction's book is this book with bids as ops", () => {
  const bids = new BidBook({ settleWindowMs: 50 });
  bids.add('b1', JSON.stringify({ action: 'bid', auctionId: 'lot-1', bidId: 'b1', amount: 150 }), 150, true, 0);
  assert.equal(bids.ops.unconfirmed.get('b1').digest, opDigest({ amount: 150 }));
  assert.equal(bids.unconfirmed.get('b1').amount, 150);
  assert.equal(bids.unconfirmed.get('b1').auctionId, 'lot-1');
  assert.equal(bids.settleWindowMs, 50);
  assert.equal(bids.offline.max, 16);
});

test('an op of no topic is named in every read but belongs to no topic list', () => {
  const book = new OpBook();
  book.add('m1', 'f', 'd', true, 0);
  book.onResult('m1', 'unknown', null, 0);
  assert.deepEqual(book.doubtsOf('chat:any'), ['m1']);
  assert.deepEqual(book.doubtfulTopics(), []);
  assert.deepEqual(book.settle('chat:any', new Set(['m1/d']), 'r').settled, [{ opId: 'm1', stands: true, region: 'r' }]);
  // Without final reasons, a replayed rejection is always doubtful.
  book.add('m2', 'f2', 'd2', true, 0, 'chat:r1');
  book.replay();
  assert.equal(book.onResult('m2', 'rejected', 'op_id_reused', 0).doubtful, true);
});
