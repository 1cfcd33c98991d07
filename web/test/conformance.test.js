// The conformance vectors (conformance/*.json at the repository root) against the browser
// client's rules. The Rust client runs the same files (crates/client/tests/conformance.rs):
// a rule changed in one client and not the other fails here or there.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { backoffDelay, HeartbeatTracker, FallbackPolicy, decideMove, minimumNextBid, BidBook, offlineBidExpired, givesUp, tokenErrorGivesUp, TokenDenied, REASON_CODES, canonicalJson, opDigest, TopicLog, conversation } from '../wsdr-client.js';

function vectors(rule) {
  const file = JSON.parse(readFileSync(new URL(`../../conformance/${rule}.json`, import.meta.url), 'utf8'));
  assert.equal(file.rule, rule);
  return file.cases;
}

test('heartbeat vectors', () => {
  const cases = vectors('heartbeat');
  assert.ok(cases.length >= 10);
  for (const c of cases) {
    const hb = new HeartbeatTracker({ intervalMs: c.config.interval_ms, timeoutMs: c.config.timeout_ms, threshold: c.config.threshold });
    c.steps.forEach((step, i) => {
      const at = `${c.name}, step ${i}`;
      if (step.pong) {
        hb.onPong();
      } else if (step.error_frame) {
        const got = hb.onErrorFrame();
        assert.equal(got.nextInMs, step.expect.next_ms, at);
        assert.equal(got.broken || hb.failures >= hb.threshold, step.expect.broken, at);
      } else if (step.due) {
        const got = hb.onTick(step.due.silence_ms, step.due.wall_silence_ms);
        const broken = got.broken ? (got.reason === 'silent' ? 'silent' : 'failures') : null;
        assert.equal(broken, step.expect.broken, at);
        if (!broken) assert.equal(got.nextInMs, step.expect.next_ms, at);
      } else {
        assert.fail(`${at}: unknown step ${JSON.stringify(step)}`);
      }
    });
  }
});

test('backoff vectors', () => {
  const cases = vectors('backoff');
  assert.ok(cases.length >= 10);
  for (const c of cases) {
    const options = {
      baseMs: c.config.base_ms,
      capMs: c.config.cap_ms,
      floorMs: c.config.floor_ms,
      herdWindowMs: c.config.herd_window_ms ?? 0,
      jitter: c.config.jitter,
      herdHint: c.config.herd_hint,
      throttled: c.throttled,
      advertisedHerdMs: c.advertised_ms ?? 0,
    };
    const low = backoffDelay(c.attempt, options, () => 0);
    const high = backoffDelay(c.attempt, options, () => 1);
    assert.deepEqual([low, high], [c.expect.low_ms, c.expect.high_ms], c.name);
  }
});

test('fallback vectors', () => {
  const GLOBAL = 'wss://auction.example.com';
  const cases = vectors('fallback');
  assert.ok(cases.length >= 10);
  for (const c of cases) {
    const policy = new FallbackPolicy({ regions: c.config.regions, afterFailures: c.config.after_failures, returnAfter: c.config.return_after });
    c.steps.forEach((step, i) => {
      const at = `${c.name}, step ${i}`;
      if ('restored' in step) {
        policy.onRestored(step.restored);
      } else if (step.failure) {
        const moved = policy.onFailure();
        assert.equal(moved, step.expect.moved, at);
        assert.equal(policy.target, step.expect.target, at);
      } else if ('probe' in step) {
        assert.equal(policy.onProbe(step.probe, step.current), step.expect, at);
      } else if ('redirect_from' in step) {
        const redirected = policy.redirectFrom(step.redirect_from);
        assert.equal(redirected ? policy.target : null, step.expect.target, at);
        if ('redirected' in step.expect) assert.equal(redirected, step.expect.redirected, at);
      } else if ('move_to' in step) {
        policy.moveTo(step.move_to);
      } else if ('expect_url' in step) {
        assert.equal(policy.url(GLOBAL), step.expect_url, at);
      } else {
        assert.fail(`${at}: unknown step ${JSON.stringify(step)}`);
      }
    });
  }
});

test('moves vectors', () => {
  const cases = vectors('moves');
  assert.ok(cases.length >= 10);
  const kind = (reason) => {
    if (reason === 'already there') return 'already-there';
    if (reason.startsWith('unknown endpoint')) return 'unknown-endpoint';
    if (reason.startsWith('endpoint of')) return 'endpoint-of-another-region';
    return reason;
  };
  for (const c of cases) {
    const frame = { type: 'moveTo', region: c.serving_region, to: c.frame.to, endpoint: c.frame.endpoint, afterMs: c.frame.after_ms ?? 0, windowMs: c.frame.window_ms };
    const options = { servingRegion: c.serving_region, globalUrl: c.global_url, regions: c.regions, maxWindowMs: c.max_window_ms };
    const earliest = decideMove(frame, options, () => 0);
    const latest = decideMove(frame, options, () => 1);
    if (c.expect.ignored) {
      assert.equal(kind(earliest.ignored ?? 'followed'), c.expect.ignored, c.name);
      continue;
    }
    assert.equal(earliest.ignored, undefined, c.name);
    assert.equal(earliest.to, c.expect.to, c.name);
    assert.equal(earliest.target, c.expect.target, c.name);
    assert.equal(earliest.afterMs, c.expect.after_min_ms, c.name);
    assert.ok(Math.abs(latest.afterMs - c.expect.after_max_ms) <= 1, `${c.name}: latest ${latest.afterMs}`);
  }
});

test('minimum bid vectors', () => {
  const cases = vectors('minimum_bid');
  assert.ok(cases.length >= 5);
  for (const c of cases) {
    const auction = {
      startingPrice: c.starting_price,
      minIncrement: c.min_increment,
      highBid: c.high == null ? null : { amount: c.high, bidder: 'bob', bidId: 'bob-00000001', at: 1 },
    };
    assert.equal(minimumNextBid(auction), c.expect, c.name);
  }
  // A server that sent no rules: nothing to show.
  assert.equal(minimumNextBid({ highBid: null }), null);
});

test('offline bids vectors', () => {
  const cases = vectors('offline_bids');
  assert.ok(cases.length >= 5);
  for (const c of cases) {
    if (c.expect_expired) {
      // Through the book: bids made offline at `now - age`, the session opening at `now`.
      const now = 1_000_000;
      const book = new BidBook({ offline: { max: c.max, maxAgeMs: c.max_age_ms } });
      c.ages_ms.forEach((age, i) => {
        assert.equal(offlineBidExpired(age, c.max_age_ms), c.expect_expired[i], `${c.name}: ${age}`);
        book.add(`bid-${i}`, `frame-${i}`, 100 + i, false, now - age);
      });
      const expired = new Set(book.expireOffline(now));
      c.ages_ms.forEach((_, i) => assert.equal(expired.has(`bid-${i}`), c.expect_expired[i], `${c.name}: bid ${i}`));
      assert.equal(book.replay().length, c.expect_expired.filter((e) => !e).length, c.name);
    }
    if (c.expect_admitted) {
      const book = new BidBook({ offline: { max: c.max, maxAgeMs: c.max_age_ms } });
      c.expect_admitted.forEach((admitted, i) => {
        let ok = true;
        try {
          book.add(`bid-${i}`, `frame-${i}`, 100 + i, false, 0);
        } catch {
          ok = false;
        }
        assert.equal(ok, admitted, `${c.name}: bid ${i}`);
      });
    }
  }
});

test('give up vectors', () => {
  const cases = vectors('give_up');
  assert.ok(cases.length >= 6);
  for (const c of cases) {
    if (c.token_error) {
      const error = c.token_error === 'denied' ? new TokenDenied('signed out') : new Error('timeout');
      assert.equal(tokenErrorGivesUp(error), c.expect_gives_up, c.name);
      continue;
    }
    let gaveUpAt = null;
    for (let attempt = 0; attempt < c.failures; attempt += 1) {
      if (givesUp(attempt, c.max_attempts)) {
        gaveUpAt = attempt;
        break;
      }
    }
    assert.equal(gaveUpAt, c.expect_gave_up_at, c.name);
  }
});

test('reason code vectors', () => {
  const cases = vectors('reason_codes');
  assert.deepEqual(
    Object.fromEntries(cases.map((c) => [c.name, c.code])),
    { ...REASON_CODES },
    'the browser table is the vectors\' table, name for name',
  );
  for (const c of cases) assert.equal(c.code >= 4100, c.terminal, c.name);
});

test('digest vectors', () => {
  const file = JSON.parse(readFileSync(new URL('../../conformance/digest.json', import.meta.url), 'utf8'));
  assert.equal(file.rule, 'digest');
  const valueOf = (c) => ('raw' in c ? JSON.parse(c.raw) : c.value);
  assert.ok(file.cases.length >= 15);
  for (const c of file.cases) {
    assert.equal(canonicalJson(valueOf(c)), c.canonical, c.name);
    assert.equal(opDigest(valueOf(c)), c.digest, c.name);
  }
  assert.ok(file.refused.length >= 4);
  for (const c of file.refused) assert.throws(() => canonicalJson(valueOf(c)), TypeError, c.name);
});

test('topic log vectors', () => {
  const cases = vectors('topic_log');
  assert.ok(cases.length >= 8);
  const copy = ([log, position]) => ({ author: 'a', opId: `op-${log}-${String(position).padStart(4, '0')}`, region: log, position, log, at: position, digest: opDigest({ text: `${log} ${position}` }), op: { text: `${log} ${position}` } });
  for (const c of cases) {
    const log = new TopicLog('chat:lobby');
    let last = { added: [], behind: false };
    c.steps.forEach((step, i) => {
      const at = `${c.name}, step ${i}`;
      if (step.counted) log.counted(step.counted);
      if (step.merge) last = log.merge(step.merge.versions, null, step.merge.ops.map(copy));
      if ('expect_added' in step) assert.deepEqual(last.added.map((op) => [op.log, op.position]), step.expect_added, `${at}: added`);
      if ('expect_behind' in step) assert.equal(last.behind, step.expect_behind, `${at}: behind`);
      if ('answered' in step) assert.deepEqual(log.answered(last, step.answered), step.expect_answer, `${at}: answer`);
      if ('expect_frontier' in step) assert.deepEqual(log.frontier(), step.expect_frontier, `${at}: frontier`);
      if ('expect_holes' in step) assert.deepEqual(log.holes(), step.expect_holes, `${at}: holes`);
      if ('expect_worth_asking' in step) assert.equal(log.worthAsking(), step.expect_worth_asking, `${at}: worth asking`);
      if ('expect_request_since' in step) {
        const frame = JSON.parse(log.request());
        assert.deepEqual(frame.since ?? null, step.expect_request_since, `${at}: since`);
      }
    });
  }
});

test('conversation vectors', () => {
  const cases = vectors('conversation');
  assert.ok(cases.length >= 6);
  for (const c of cases) {
    const copies = c.copies.map((x, i) => ({ author: x.author, opId: x.opId, region: x.region, position: i + 1, log: x.region, at: x.at, digest: opDigest({ text: x.text }), op: { text: x.text } }));
    // The order is a function of the set: given forwards or backwards, the same.
    for (const given of [copies, [...copies].reverse()]) {
      const got = conversation(given).map((m) => [m.author, m.opId, m.text, m.region]);
      assert.deepEqual(got, c.expect, c.name);
    }
  }
});
