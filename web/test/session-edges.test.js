// The browser client's session at its edges: settings refused, a logger that throws, a user's
// reconnect, the browser going offline while a retry waits, a socket that cannot be opened,
// API Gateway's internal errors as heartbeat failures, and the ledger's tie-break.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { REASON_CODES, outranks } from '../wsdr-client.js';
import { sockets, until } from './sockets.js';
import { client as sessionClient, state } from './session-client.js';

/** The session tests' client, with each ended session's reason and code. */
function client(Socket, options = {}) {
  const { c, events } = sessionClient(Socket, options);
  const ended = {
    get list() {
      return events.filter(([type]) => type === 'disconnected').map(([, d]) => [d.reason, d.code]);
    },
  };
  return { c, ended };
}

test('a token placement other than the two the server reads is refused when the client is made', () => {
  const { Socket } = sockets();
  assert.throws(() => client(Socket, { tokenPlacement: 'header' }), /tokenPlacement must be 'query' or 'subprotocol', not header/);
  assert.doesNotThrow(() => client(Socket, { tokenPlacement: 'subprotocol' }));
});

test("a logger that throws is the logger's problem: the session goes on", async (t) => {
  const { all, Socket } = sockets();
  const logged = [];
  const { c } = client(Socket, {
    log: (entry) => {
      logged.push(entry.type);
      throw new Error('a broken logger');
    },
  });
  t.after(() => c.close());
  c.start();
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  all[0].deliver(state('us-east-1'));
  assert.equal(c.state.region, 'us-east-1');
  assert.ok(logged.includes('send') && logged.includes('receive'), logged.join(','));
});

test('reconnect() ends an open session at once and connects again', async (t) => {
  const { all, Socket } = sockets();
  const { c, ended } = client(Socket);
  t.after(() => c.close());
  c.start();
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  all[0].deliver(state('us-east-1'));
  c.reconnect();
  assert.deepEqual(ended.list, [['reconnect asked', REASON_CODES.reconnect_asked]]);
  await until(() => all.length === 2, 'a new socket');
  assert.equal(all[0].closedWith?.code, 1000);
});

test('going offline while a retry waits cancels it until the network is back', async (t) => {
  const { all, Socket } = sockets();
  const network = new EventTarget();
  // A minute's backoff: only `online` brings the next connect in time.
  const { c } = client(Socket, { networkEvents: network, backoff: { baseMs: 60000, capMs: 60000, floorMs: 60000, jitter: false } });
  const statuses = [];
  c.addEventListener('status', (e) => statuses.push(e.detail));
  t.after(() => c.close());
  c.start();
  await until(() => all.length === 1, 'a socket');
  all[0].drop();
  await until(() => statuses.some((s) => s.state === 'reconnecting' && s.delayMs > 0), 'a retry waiting');
  network.dispatchEvent(new Event('offline'));
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(all.length, 1, 'nothing connects while offline');
  assert.ok(
    statuses.some((s) => s.reason === 'the network went away' && s.code === REASON_CODES.offline && s.delayMs === null),
    JSON.stringify(statuses),
  );
  network.dispatchEvent(new Event('online'));
  await until(() => all.length === 2, 'a connect once online');
});

test('a socket the browser refuses to open fails the connect, and the client tries again', async (t) => {
  const { all, Socket } = sockets();
  let refused = 0;
  class Refusing extends Socket {
    constructor(url, protocols) {
      if (refused === 0) {
        refused += 1;
        throw new SyntaxError('bad url');
      }
      super(url, protocols);
    }
  }
  const { c } = client(Refusing);
  const statuses = [];
  c.addEventListener('status', (e) => statuses.push(e.detail));
  t.after(() => c.close());
  c.start();
  await until(() => all.length === 1, 'a socket after the refusal');
  const failed = statuses.find((s) => typeof s.reason === 'string' && s.reason.startsWith('cannot open:'));
  assert.ok(failed, JSON.stringify(statuses));
  assert.equal(failed.code, REASON_CODES.connect_failed);
});

test("API Gateway's internal errors count as heartbeat failures, one per round: two rounds end the session", async (t) => {
  const { all, Socket } = sockets();
  // The confirming heartbeat after a failure comes 20 ms later (the timeout's margin over the
  // interval), well inside the test's wait.
  const { c, ended } = client(Socket, { heartbeatIntervalMs: 100, heartbeatTimeoutMs: 120 });
  t.after(() => c.close());
  c.start();
  await until(() => all.length === 1, 'a socket');
  all[0].open();
  all[0].deliver(state('us-east-1'));
  all[0].deliver({ message: 'Internal server error', connectionId: 'x', requestId: 'y' });
  // The gateway's frame does not say which request it answers: one failure per round.
  all[0].deliver({ type: 'error', code: 'internal', message: 'boom' });
  assert.deepEqual(ended.list, []);
  await until(() => all[0].frames('heartbeat').length === 1, 'the confirming heartbeat');
  all[0].deliver({ type: 'error', code: 'internal', message: 'boom' });
  assert.deepEqual(ended.list, [['heartbeat failures', REASON_CODES.heartbeat_failures]]);
});

test('the ledger ranks by amount, then the earliest copy, then bidder, then bidId', () => {
  const bid = (amount, at, bidder, bidId) => ({ amount, at, bidder, bidId });
  assert.ok(outranks(bid(2, 9, 'z', 'z'), bid(1, 1, 'a', 'a')));
  assert.ok(!outranks(bid(1, 1, 'a', 'a'), bid(2, 9, 'z', 'z')));
  assert.ok(outranks(bid(1, 1, 'z', 'z'), bid(1, 2, 'a', 'a')));
  assert.ok(!outranks(bid(1, 2, 'a', 'a'), bid(1, 1, 'z', 'z')));
  assert.ok(outranks(bid(1, 1, 'a', 'z'), bid(1, 1, 'b', 'a')));
  assert.ok(!outranks(bid(1, 1, 'b', 'a'), bid(1, 1, 'a', 'z')));
  assert.ok(outranks(bid(1, 1, 'a', 'a'), bid(1, 1, 'a', 'b')));
  assert.ok(!outranks(bid(1, 1, 'a', 'b'), bid(1, 1, 'a', 'a')));
  assert.ok(!outranks(bid(1, 1, 'a', 'a'), bid(1, 1, 'a', 'a')), 'not above itself');
});
