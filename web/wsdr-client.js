// wsdr browser client: the same policy as the Rust client (crates/client, docs/CLIENT.md).
//
// - application heartbeat; a heartbeat round fails when it is not answered by the next
//   heartbeat or answered with an internal-error frame; 2 failed rounds in a row = broken;
//   after one failure the confirmation heartbeat goes out after (timeout - interval);
// - exponential backoff with full jitter (base 2 s, cap 20 s), widened to the herd window
//   after a handshake the server refused for load; the first retry after an unplanned loss
//   is drawn from the herd window the server advertises (herdWindowMs in state and pong);
// - a fresh token for every connect, getState after every (re)connect, replay of unconfirmed
//   bids with the same bidId;
// - optional client-assisted failover: the Regions' own endpoints after 2 consecutive
//   failures, probing the global name, adopting it when DNS agrees, returning after a
//   healthy streak that doubles per fallback.
//
// No framework, no build step: an ES module that browsers and node's test runner load as is.

/** The longest advertised herd window a client honours (as MAX_HERD_HINT in Rust). */
export const MAX_HERD_HINT_MS = 3600000;

/**
 * Full-jitter backoff: uniform(floor, min(cap, base * 2^attempt)), in ms. With
 * `advertisedHerdMs` (the server's herd hint, honoured unless `herdHint: false`), the first
 * retry (attempt 0) is drawn from at least that window, as in crates/client/src/backoff.rs.
 */
export function backoffDelay(attempt, options = {}, random = Math.random) {
  const base = options.baseMs ?? 2000;
  const cap = options.capMs ?? 20000;
  const floor = options.floorMs ?? 0;
  let ceiling = Math.max(Math.min(cap, base * 2 ** Math.min(attempt, 30)), floor);
  const advertised = options.herdHint === false ? 0 : Math.min(Number(options.advertisedHerdMs) || 0, options.maxHerdHintMs ?? MAX_HERD_HINT_MS);
  if (attempt === 0 && advertised > 0) ceiling = Math.max(ceiling, advertised);
  // A 429 widens to the fixed herd window and to the advertised one, whichever are known.
  if (options.throttled) ceiling = Math.max(ceiling, options.herdWindowMs || 0, advertised);
  if (options.jitter === false) return ceiling;
  return floor + random() * (ceiling - floor);
}

/**
 * The heartbeat rule as a state machine, free of timers and sockets.
 * Feed it frames and heartbeat ticks; it says when the session is broken and when the next
 * heartbeat is due.
 */
export class HeartbeatTracker {
  constructor({ intervalMs = 30000, timeoutMs = 35000, threshold = 2 } = {}) {
    this.intervalMs = intervalMs;
    this.timeoutMs = timeoutMs;
    this.threshold = Math.max(1, threshold);
    this.confirmMs = Math.min(intervalMs, Math.max(intervalMs / 10, timeoutMs - intervalMs));
    this.failures = 0;
    this.outstanding = false;
    this.roundFailed = false;
  }

  /** A pong: healthy. */
  onPong() {
    this.failures = 0;
    this.outstanding = false;
    this.roundFailed = false;
  }

  /**
   * An internal-error frame (API Gateway's, or ours). At most one failure per round: the
   * gateway's frame does not say which request it answers.
   * Returns { broken, nextInMs } (nextInMs: reschedule the heartbeat, or null).
   */
  onErrorFrame() {
    this.outstanding = false;
    if (this.roundFailed) return { broken: false, nextInMs: null };
    this.roundFailed = true;
    this.failures += 1;
    return { broken: this.failures >= this.threshold, nextInMs: this.confirmMs };
  }

  /**
   * The heartbeat is due. `silentMs`: time since anything was received, by the monotonic
   * clock; `wallSilentMs` the same by the wall clock. Far ahead of the monotonic one (the
   * machine slept through the timeout) the socket is presumed dead at once, as the Rust
   * client's rule does. Returns { broken, reason, send, nextInMs }.
   */
  onTick(silentMs, wallSilentMs = silentMs) {
    if (wallSilentMs > this.timeoutMs && wallSilentMs > silentMs + this.timeoutMs) {
      return { broken: true, reason: 'silent', send: false, nextInMs: null };
    }
    if (this.outstanding && !this.roundFailed) this.failures += 1;
    if (this.failures >= this.threshold) {
      return {
        broken: true,
        reason: silentMs > this.timeoutMs ? 'silent' : 'heartbeat failures',
        send: false,
        nextInMs: null,
      };
    }
    this.outstanding = true;
    this.roundFailed = false;
    return {
      broken: false,
      reason: null,
      send: true,
      nextInMs: this.failures > 0 ? this.confirmMs : this.intervalMs,
    };
  }
}

/** Client-assisted failover (the Rust client's `EndpointPolicy`). */
export class FallbackPolicy {
  constructor({ regions = [], afterFailures = 2, recheckMs = 60000, returnAfter = 3 } = {}) {
    this.regions = regions; // [{ region, url }]
    this.afterFailures = Math.max(1, afterFailures);
    this.recheckMs = recheckMs;
    this.returnAfter = Math.max(1, returnAfter);
    this.target = null; // null = the global name, else an index into regions
    this.failures = 0;
    this.lastRegion = null;
    this.healthyProbes = 0;
    this.fallbacks = 0;
  }

  get onFallback() {
    return this.target !== null;
  }

  url(globalUrl) {
    return this.target === null ? globalUrl : (this.regions[this.target]?.url ?? globalUrl);
  }

  onRestored(region) {
    this.failures = 0;
    this.lastRegion = region;
  }

  /** A connect failed or a session broke. Returns true when the target changed. */
  onFailure() {
    this.failures += 1;
    if (this.failures < this.afterFailures || this.regions.length === 0) return false;
    this.failures = 0;
    this.healthyProbes = 0;
    const failing = this.target === null ? this.lastRegion : this.regions[this.target]?.region;
    const start = this.target === null ? 0 : this.target + 1;
    let next = null;
    for (let i = start; i < this.regions.length; i += 1) {
      if (this.regions[i].region !== failing) {
        next = i;
        break;
      }
    }
    if (next === this.target) return false;
    if (next !== null && this.target === null) this.fallbacks += 1;
    this.target = next;
    return true;
  }

  probesNeeded() {
    const doublings = Math.min(3, Math.max(0, this.fallbacks - 1));
    return this.returnAfter * 2 ** doublings;
  }

  /** A probe of the global name: healthyRegion is the Region that answered, or null. */
  onProbe(healthyRegion, currentRegion) {
    if (!this.onFallback) return 'stay';
    if (healthyRegion === null) {
      this.healthyProbes = 0;
      return 'stay';
    }
    if (healthyRegion === currentRegion) {
      this.useGlobal();
      return 'adopt-global';
    }
    this.healthyProbes += 1;
    if (this.healthyProbes >= this.probesNeeded()) {
      this.useGlobal();
      return 'return';
    }
    return 'stay';
  }

  useGlobal() {
    this.target = null;
    this.failures = 0;
    this.healthyProbes = 0;
  }

  /** Strong mode: `region` cannot reach its table's quorum. The next connect goes at once to
   * the first other Region's own endpoint; false if none is known. */
  redirectFrom(region) {
    const index = this.regions.findIndex((r) => r.region !== region);
    if (index < 0) return false;
    if (this.target === null) this.fallbacks += 1;
    this.target = index;
    this.failures = 0;
    this.healthyProbes = 0;
    return true;
  }

  /** A server-directed move: the next connect goes to `target` (null: the global name). */
  moveTo(target) {
    this.target = target !== null && target < this.regions.length ? target : null;
    this.failures = 0;
    this.healthyProbes = 0;
  }
}

/** The longest moveTo window a client honours (AWS ms; divide by the lab's time scale). */
export const MAX_MOVE_WINDOW_MS = 3600000;

/**
 * Decide on a moveTo frame, as the Rust client does (crates/client/src/moves.rs): follow it
 * only to a destination already known (the global name, or a configured Region endpoint of
 * the named Region), after the frame's delay (afterMs: the client's slot in the herd) and at a
 * uniformly random moment within the window; delay and window together are capped.
 * Returns { to, target, afterMs } (target: null = the global name, else a regions index)
 * or { ignored: reason }.
 */
export function decideMove(frame, { servingRegion, globalUrl, regions = [], maxWindowMs = MAX_MOVE_WINDOW_MS }, random = Math.random) {
  if (typeof frame.to !== 'string' || frame.to === servingRegion) return { ignored: 'already there' };
  let target;
  if (typeof frame.endpoint === 'string') {
    if (frame.endpoint === globalUrl) {
      target = null;
    } else {
      const index = regions.findIndex((r) => r.url === frame.endpoint);
      if (index < 0) return { ignored: `unknown endpoint ${frame.endpoint}` };
      if (regions[index].region !== frame.to) return { ignored: `endpoint of ${regions[index].region}` };
      target = index;
    }
  } else {
    const index = regions.findIndex((r) => r.region === frame.to);
    target = index < 0 ? null : index;
  }
  const delayMs = Math.max(0, Math.min(Number(frame.afterMs) || 0, maxWindowMs));
  const windowMs = Math.max(0, Math.min(Number(frame.windowMs) || 0, maxWindowMs - delayMs));
  return { to: frame.to, target, afterMs: delayMs + random() * windowMs };
}

/** A 32-hex-digit bid id (the protocol wants 8-64 characters). */
export function newBidId(random = Math.random) {
  let id = '';
  for (let i = 0; i < 32; i += 1) id += Math.floor(random() * 16).toString(16);
  return id;
}

/** Internal-error frames: API Gateway's `{"message":"Internal server error"}` and ours. */
export function isInternalError(frame) {
  return (
    (frame && frame.type === undefined && frame.message === 'Internal server error') ||
    (frame && frame.type === 'error' && frame.code === 'internal')
  );
}

/** Whether version vector `a` has seen everything `b` has (every Region's count >= b's). */
export function dominates(a, b) {
  return Object.entries(b ?? {}).every(([region, count]) => (a?.[region] ?? 0) >= count);
}

/** Whether high bid `a` outranks `b`, by the server's order: higher amount; then the earlier
 * copy; then bidder, then bidId, the smaller first. */
export function outranks(a, b) {
  if (a.amount !== b.amount) return a.amount > b.amount;
  if (a.at !== b.at) return a.at < b.at;
  if (a.bidder !== b.bidder) return a.bidder < b.bidder;
  return a.bidId < b.bidId;
}

/** The higher of two optional high bids (a max register: merge order does not matter). */
export function higherBid(a, b) {
  if (!a) return b ?? null;
  if (!b) return a;
  return outranks(b, a) ? b : a;
}

/** The largest amount the protocol allows (minor units). */
export const MAX_AMOUNT = 1_000_000_000_000;

/** The smallest amount that can win against the high bid `auction` shows, by the auction's
 * rules (`startingPrice`, `minIncrement`, sent in `state`): the starting price with no high
 * bid, else the high bid plus the increment (0 counts as 1). `null` when the server sent no
 * rules or no amount within MAX_AMOUNT can beat the high bid. The server decides bids by the
 * same rule (conformance/minimum_bid.json). */
export function minimumNextBid(auction) {
  const start = auction?.startingPrice;
  const increment = auction?.minIncrement;
  if (!Number.isInteger(start) || !Number.isInteger(increment)) return null;
  const high = auction.highBid?.amount;
  const floor = high == null ? start : high + Math.max(increment, 1);
  return floor >= 1 && floor <= MAX_AMOUNT ? floor : null;
}

/**
 * An op's canonical JSON (conformance/digest.json; the server's and the Rust client's
 * `wsdr_protocol::digest`): no whitespace, members sorted by key in code point order, strings
 * as JSON.stringify writes them, numbers only integers JavaScript holds exactly. Throws for a
 * value that has none (a fraction, an unsafe integer, a lone surrogate, undefined at the top,
 * a function, a non-plain object, nesting past 64 levels): such an op is never sent.
 * Members whose value is undefined are left out, as JSON.stringify leaves them out of the
 * frame that carries the op.
 */
export function canonicalJson(value) {
  return canonicalOf(value, 0);
}

const DIGEST_MAX_DEPTH = 64;
const LONE_SURROGATE = /\p{Surrogate}/u;

function byCodePoint(a, b) {
  const x = [...a];
  const y = [...b];
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i += 1) {
    const d = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

function canonicalString(value) {
  if (LONE_SURROGATE.test(value)) throw new TypeError('an op\'s strings are well-formed Unicode');
  return JSON.stringify(value);
}

function canonicalOf(value, depth) {
  if (depth > DIGEST_MAX_DEPTH) throw new TypeError(`an op nests deeper than ${DIGEST_MAX_DEPTH} levels`);
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isSafeInteger(value)) throw new TypeError(`an op's numbers are integers of at most ${Number.MAX_SAFE_INTEGER} in magnitude`);
      return String(value);
    case 'string':
      return canonicalString(value);
    case 'object': {
      if (Array.isArray(value)) return `[${value.map((item) => canonicalOf(item, depth + 1)).join(',')}]`;
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) throw new TypeError('an op is made of plain objects, arrays, strings, integers, booleans and null');
      const keys = Object.keys(value).filter((key) => value[key] !== undefined).sort(byCodePoint);
      return `{${keys.map((key) => `${canonicalString(key)}:${canonicalOf(value[key], depth + 1)}`).join(',')}}`;
    }
    default:
      throw new TypeError(`an op cannot carry a value of type ${typeof value}`);
  }
}

const FNV_OFFSET = 0x6c62272e07bb014262b821756295c58dn;
const FNV_PRIME = 0x0000000001000000000000000000013bn;
const FNV_MASK = (1n << 128n) - 1n;
const UTF8 = new TextEncoder();

/** An op's digest: 128-bit FNV-1a of its canonical JSON's UTF-8 bytes, 32 lower-case hex
 * digits. Settlement compares digests: a copy stands for my write when its op id and digest
 * are mine. */
export function opDigest(value) {
  let hash = FNV_OFFSET;
  for (const byte of UTF8.encode(canonicalJson(value))) hash = ((hash ^ BigInt(byte)) * FNV_PRIME) & FNV_MASK;
  return hash.toString(16).padStart(32, '0');
}

/** Most bidIds one getState may name (`bidIds`), as the server enforces. */
export const SETTLE_BIDS_MAX = 32;

/** Ops made while disconnected: at most `max` wait for the next session, and one older than
 * `maxAgeMs` when it opens is dropped unsent (`bidExpired`), never sent late; the Rust
 * client's `OfflineBids::Queue` default (conformance/offline_bids.json). */
export const OFFLINE_BIDS = Object.freeze({ max: 16, maxAgeMs: 30000 });

/** Whether an op queued `ageMs` ago is too old to send when a session opens. */
export function offlineBidExpired(ageMs, maxAgeMs = OFFLINE_BIDS.maxAgeMs) {
  return ageMs > maxAgeMs;
}

/** The auction a bid frame names (undefined for a frame that is not one). */
function auctionOf(frame) {
  try {
    const id = JSON.parse(frame)?.auctionId;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

/** The key an op stands under: its op id and the digest of its payload ([opDigest]). */
const standingKey = (opId, digest) => `${opId}/${digest}`;

/**
 * The client's book of its own writes ("ops"), for any app, free of timers and sockets
 * (docs/CLIENT.md). It knows ops by their op id (the idempotency key the server keeps for
 * good) and the digest of their payload, never by what they mean:
 * - sent, unanswered ops are replayed after every reconnect (same op id, same frame);
 * - a replay answered `rejected` (the Region may not have seen the first copy yet), unless
 *   the reason is one of `finalReasons` (the op id reused with another payload), or an
 *   `unknown` answer is doubtful: settled as standing when the server shows a copy with the
 *   same op id and digest ([OpBook#settle], or a push shows it: [OpBook#settleShown]), resent
 *   when an `unknown` one is not shown, and settled as not standing after `settleWindowMs`;
 * - ops made offline wait, at most `offline.max`, and expire unsent after `offline.maxAgeMs`.
 * Each entry keeps the app's own `fields` of the op (the auction's amount), also spread on
 * the entry, to hand back with its result.
 */
export class OpBook {
  // Stryker disable next-line ArrayDeclaration: a default list holding one made-up reason differs only for a server answering that very reason.
  constructor({ settleWindowMs = 120000, offline = OFFLINE_BIDS, finalReasons = [] } = {}) {
    this.settleWindowMs = settleWindowMs;
    this.offline = { ...OFFLINE_BIDS, ...offline };
    this.finalReasons = new Set(finalReasons);
    this.unconfirmed = new Map(); // opId -> { ...fields, frame, digest, topic, sends, queuedAt, fields }
    this.doubtful = new Map(); // opId -> { ...fields, frame, digest, topic, since, unknown, fields }
  }

  /** A new op; `sentNow` when it goes out on the open session at once. An op made offline
   * waits for the next session (throws when `offline.max` already wait). */
  add(opId, frame, digest, sentNow, now = Date.now(), topic = undefined, fields = {}) {
    if (!sentNow && this.queued() >= this.offline.max) {
      throw new Error(`offline: ${this.offline.max} writes already wait for the connection`);
    }
    this.unconfirmed.set(opId, { ...fields, frame, digest, topic, sends: sentNow ? 1 : 0, queuedAt: now, fields });
  }

  /** Ops made offline and never sent yet. */
  queued() {
    let n = 0;
    for (const op of this.unconfirmed.values()) if (op.sends === 0) n += 1;
    return n;
  }

  /** As a session opens, before `replay`: drops the ops made offline that are now too old to
   * send, and returns their op ids. */
  expireOffline(now = Date.now()) {
    const expired = [];
    for (const [opId, op] of this.unconfirmed) {
      if (op.sends === 0 && offlineBidExpired(now - op.queuedAt, this.offline.maxAgeMs)) {
        this.unconfirmed.delete(opId);
        expired.push(opId);
      }
    }
    return expired;
  }

  /** The frames to (re)send on a new session; counts the send. */
  replay() {
    return [...this.unconfirmed.values()].map((op) => {
      op.sends += 1;
      return op.frame;
    });
  }

  /** A write's result: returns the op's `fields` (null for an op this book does not hold)
   * and whether the answer is doubtful. A
   * `redirect` (strong mode, no quorum there) decided nothing: the op stays unconfirmed, to be
   * sent again (same op id) wherever the client connects next. */
  onResult(opId, status, reason, now) {
    const op = this.unconfirmed.get(opId);
    if (status === 'redirect') return { fields: op?.fields ?? null, doubtful: false };
    this.unconfirmed.delete(opId);
    if (!op) return { fields: null, doubtful: false };
    const replayedAndRejected = status === 'rejected' && op.sends > 1 && !this.finalReasons.has(reason);
    const doubtful = replayedAndRejected || status === 'unknown';
    if (doubtful) {
      this.doubtful.set(opId, { ...op.fields, frame: op.frame, digest: op.digest, topic: op.topic, since: now, unknown: status === 'unknown', fields: op.fields });
    }
    return { fields: op.fields, doubtful };
  }

  /** The doubtful op ids of `topic` (and those of no topic), the oldest first. */
  doubtsOf(topic) {
    return [...this.doubtful].filter(([, doubt]) => doubt.topic === undefined || doubt.topic === topic).map(([opId]) => opId);
  }

  /** The topics that have doubtful ops (each needs a read naming them). */
  doubtfulTopics() {
    return [...new Set([...this.doubtful.values()].map((doubt) => doubt.topic).filter((topic) => topic !== undefined))];
  }

  /** A read of `topic` answered: `standing` holds the `opId/digest` keys of the caller's
   * copies it shows. A doubtful op shown settles as standing; an `unknown` one not shown goes
   * back to unconfirmed and its frame is returned to resend. Returns { settled, resend }. */
  settle(topic, standing, region) {
    const settled = [];
    const resend = [];
    for (const [opId, doubt] of this.doubtful) {
      // Another topic's state says nothing of this op.
      if (doubt.topic !== undefined && doubt.topic !== topic) continue;
      if (standing.has(standingKey(opId, doubt.digest))) {
        settled.push({ opId, stands: true, region });
        this.doubtful.delete(opId);
      } else if (doubt.unknown) {
        this.doubtful.delete(opId);
        this.unconfirmed.set(opId, { ...doubt.fields, frame: doubt.frame, digest: doubt.digest, topic: doubt.topic, sends: 1, queuedAt: doubt.since, fields: doubt.fields });
        resend.push(doubt.frame);
      }
    }
    return { settled, resend };
  }

  /** A push shows the caller's op `opId` with payload `digest` standing: settles it if it was
   * doubtful (the same payload only). */
  settleShown(opId, digest, region) {
    const doubt = this.doubtful.get(opId);
    if (!doubt || doubt.digest !== digest) return [];
    this.doubtful.delete(opId);
    return [{ opId, stands: true, region }];
  }

  /** At a heartbeat: doubtful ops past the window settle as not standing. */
  expire(now) {
    const settled = [];
    for (const [opId, doubt] of this.doubtful) {
      if (now - doubt.since >= this.settleWindowMs) {
        this.doubtful.delete(opId);
        settled.push({ opId, stands: false, region: null });
      }
    }
    return settled;
  }
}

/**
 * A topic whose every op counts (a chat room) as the client holds it, free of timers and
 * sockets: the same rules as the Rust client's `TopicLog` (docs/CLIENT.md, "Topics of any
 * app"). Copies are kept by log and position; per log the *frontier* is the highest position
 * up to which every copy is held; the client asks `getState{since: frontier}`, asks again
 * while an incomplete answer brings copies, and reports a hole that stays once per frontier,
 * asking again only when the server's counts move.
 */
export class TopicLog {
  constructor(topic) {
    this.topic = topic;
    this.ops = new Map(); // `${log}#${position}` -> op copy
    this.versions = {};
    this.view = null;
    // JSON of the holes of the last fruitless answer: only logs with a hole count, so another
    // log's new copies do not make a stuck hole worth asking about again.
    this.stuck = null;
    this.reported = new Set(); // `${log}#${frontier}` of every hole reported (each once)
  }

  /** The logs with a hole (the server counts, or the client holds copies, past the frontier):
   * { [log]: [frontier, count] }. */
  holes() {
    const frontier = this.frontier();
    const holes = {};
    for (const [log, at] of Object.entries(frontier)) {
      const count = this.versions[log] ?? 0;
      const heldPast = [...this.ops.values()].some((op) => op.log === log && op.position > at);
      if (count > at || heldPast) holes[log] = [at, count];
    }
    return holes;
  }

  /** Per log, the highest position up to which every copy is held. */
  frontier() {
    const logs = new Set([...Object.keys(this.versions), ...[...this.ops.values()].map((op) => op.log)]);
    const frontier = {};
    for (const log of [...logs].sort()) {
      let next = 1;
      while (this.ops.has(`${log}#${next}`)) next += 1;
      frontier[log] = next - 1;
    }
    return frontier;
  }

  /** Whether `versions` count copies past the frontier in some log. */
  isBehind(versions) {
    const frontier = this.frontier();
    return Object.entries(versions ?? {}).some(([log, count]) => (frontier[log] ?? 0) < count);
  }

  /** A pong's counts (counts only grow). */
  counted(versions) {
    for (const [log, count] of Object.entries(versions ?? {})) {
      this.versions[log] = Math.max(this.versions[log] ?? 0, count);
    }
  }

  /** Fold an answer's or a push's copies and counts in: returns { added, behind }. */
  merge(versions, view, ops) {
    this.counted(versions);
    this.view = view ?? null;
    const added = [];
    for (const op of ops ?? []) {
      const key = `${op.log}#${op.position}`;
      if (!this.ops.has(key)) {
        this.ops.set(key, op);
        added.push(op);
      }
    }
    return { added, behind: this.isBehind(this.versions) };
  }

  /** After an answer: 'done', 'again' (incomplete, it brought copies), or { hole: frontier }
   * (incomplete, nothing new, newly seen). */
  answered(merged, complete) {
    if (complete) {
      this.stuck = null;
      return 'done';
    }
    if (merged.added.length > 0) {
      this.stuck = null;
      return 'again';
    }
    const holes = this.holes();
    this.stuck = JSON.stringify(holes);
    let newly = false;
    for (const [log, [at]] of Object.entries(holes)) {
      const key = `${log}#${at}`;
      if (!this.reported.has(key)) {
        this.reported.add(key);
        newly = true;
      }
    }
    return newly ? { hole: this.frontier() } : 'done';
  }

  /** Whether asking now may bring something: not while the last fruitless answer's holes are
   * the client's, each at the same frontier and count. */
  worthAsking() {
    return this.stuck !== JSON.stringify(this.holes());
  }

  /** The `getState` for this topic: from the frontier once anything is held. */
  request(opIds = []) {
    const frame = { action: 'getState', topic: this.topic };
    if (opIds.length) frame.opIds = opIds.slice(0, SETTLE_BIDS_MAX);
    if (Object.keys(this.versions).length || this.ops.size) frame.since = this.frontier();
    return JSON.stringify(frame);
  }
}

/**
 * A chat room's messages from the copies a client holds, in the one order every client shows
 * (the Rust `wsdr_chat::conversation`, checked by the same vectors: conformance/conversation.json):
 * the copies of one message (an author's op id with one payload, accepted in one Region or,
 * replayed across a failover, in two) fold into one, placed by its earliest copy (time, then
 * Region, author, op id, digest; strings by code point). A function of the set of copies
 * alone: late copies from a split insert at their place.
 * @returns {{author: string, opId: string, text: string, at: number, region: string, digest: string}[]}
 */
export function conversation(copies) {
  const earliest = new Map();
  for (const copy of copies ?? []) {
    const key = JSON.stringify([copy.author, copy.opId, copy.digest]);
    const held = earliest.get(key);
    // Stryker disable next-line EqualityOperator: equal time and Region are one copy (a Region writes an op's copy once), so keeping either shows the same message.
    if (!held || copy.at < held.at || (copy.at === held.at && byCodePoint(copy.region, held.region) < 0)) {
      earliest.set(key, copy);
    }
  }
  const order = (a, b) =>
    a.at - b.at || byCodePoint(a.region, b.region) || byCodePoint(a.author, b.author) || byCodePoint(a.opId, b.opId) || byCodePoint(a.digest, b.digest);
  return [...earliest.values()]
    .sort(order)
    .map((copy) => ({ author: copy.author, opId: copy.opId, text: typeof copy.op?.text === 'string' ? copy.op.text : '', at: copy.at, region: copy.region, digest: copy.digest }));
}

/** A bid's payload as its digest sees it: what the server's settlement compares. */
const bidDigest = (amount) => opDigest({ amount });
/** An OpBook settlement in the auction's words. */
const asBidSettlement = ({ opId, stands, region }) => ({ bidId: opId, stands, region });

/**
 * The auction's book: an [OpBook] of bids (op id = bidId, payload = the amount; a replay
 * rejected as `bid_id_reused` is final), and the auction's view merge:
 * - `getState` names the doubtful bids of its auction (`bidIds`, at most SETTLE_BIDS_MAX), and
 *   the answer settles each by the copies it lists (`you.bids`, `you.settled[].copies`);
 * - pushes merge into the view element-wise (per-Region counts and the high bid are max
 *   registers): a late or reordered push cannot take the view backwards, and one that adds
 *   nothing is stale and dropped; a push whose high bid is my doubtful bid settles it.
 */
export class BidBook {
  constructor({ settleWindowMs = 120000, offline = OFFLINE_BIDS } = {}) {
    /** The bids as ops: the book's replay, doubt and settlement rules. */
    this.ops = new OpBook({ settleWindowMs, offline, finalReasons: ['bid_id_reused'] });
    // Each watched auction's versions and high bid as this view knows them (several auctions
    // share one socket, and one book).
    this.auctions = new Map(); // auctionId -> { versions, high }
    this.userId = null;
  }

  get settleWindowMs() {
    return this.ops.settleWindowMs;
  }

  get offline() {
    return this.ops.offline;
  }

  /** bidId -> { amount, auctionId, frame, sends, queuedAt, ... } */
  get unconfirmed() {
    return this.ops.unconfirmed;
  }

  /** bidId -> { amount, auctionId, frame, since, unknown, ... } */
  get doubtful() {
    return this.ops.doubtful;
  }

  /** What this view knows of `auctionId`: { versions, high } (nulls before its first state). */
  known(auctionId) {
    return this.auctions.get(auctionId) ?? { versions: null, high: null };
  }

  /** The getState frame for `auctionId`, naming its doubtful bids (the oldest first, at most
   * SETTLE_BIDS_MAX): the answer says for each whether it stands, by a point read. */
  stateRequest(auctionId) {
    const bidIds = this.ops.doubtsOf(auctionId).slice(0, SETTLE_BIDS_MAX);
    return JSON.stringify(bidIds.length ? { action: 'getState', auctionId, bidIds } : { action: 'getState', auctionId });
  }

  /** The auctions that have doubtful bids (each needs a getState naming them). */
  doubtfulAuctions() {
    return this.ops.doubtfulTopics();
  }

  /** Whether a pong's version vector for `auctionId` shows bids this view has not seen
   * (resync then). */
  behind(versions, auctionId) {
    return !dominates(this.known(auctionId).versions ?? {}, versions ?? {});
  }

  /** A new bid of `amount`; `sentNow` when it goes out on the open session at once. A bid
   * made offline waits for the next session (throws when `offline.max` already wait). */
  add(bidId, frame, amount, sentNow, now = Date.now(), auctionId = auctionOf(frame)) {
    this.ops.add(bidId, frame, bidDigest(amount), sentNow, now, auctionId, { amount, auctionId });
  }

  /** Bids made offline and never sent yet. */
  queued() {
    return this.ops.queued();
  }

  /** As a session opens, before `replay`: drops the bids made offline that are now too old
   * to send, and returns their bidIds (the client emits `bidExpired` for each). */
  expireOffline(now = Date.now()) {
    return this.ops.expireOffline(now);
  }

  /** The frames to (re)send on a new session; counts the send. */
  replay() {
    return this.ops.replay();
  }

  /** A bidResult: returns the bid's amount and whether the answer is doubtful. */
  onResult(frame, now) {
    const { fields, doubtful } = this.ops.onResult(frame.bidId, frame.status, frame.reason, now);
    return { amount: fields?.amount ?? null, doubtful };
  }

  /** A state frame: settles listed bids; returns { settled, resend }. */
  onState(frame) {
    const auctionId = frame.auction?.id;
    this.auctions.set(auctionId, { versions: frame.auction?.versions ?? null, high: frame.auction?.highBid ?? null });
    this.userId = frame.you?.userId ?? this.userId;
    const standing = new Set();
    const stands = (bidId, amount) => {
      // A copy whose amount has no digest (not an exact integer) stands for none of my bids.
      try {
        standing.add(standingKey(bidId, bidDigest(amount)));
      } catch {
        /* not a bid this client could have sent */
      }
    };
    // Stryker disable next-line ArrayDeclaration: an element that is no bid view adds the key of bidId `undefined` with the digest of `{}`, which no bid of this book has (every one has an amount).
    for (const b of frame.you?.bids ?? []) stands(b.bidId, b.amount);
    for (const s of frame.you?.settled ?? []) {
      if (!s.stands) continue;
      // Each copy's own amount (a bidId reused with two amounts has one per Region);
      // `amount` alone from servers that predate `copies`.
      // Stryker disable next-line ArrayDeclaration: as above, a non-copy adds the digest of `{}`, which no bid has.
      for (const copy of s.copies ?? []) stands(s.bidId, copy.amount);
      // Stryker disable next-line ConditionalExpression: without an amount the key is the digest of `{}`, which no bid has; the test only skips useless work.
      if (s.amount !== undefined) stands(s.bidId, s.amount);
    }
    const { settled, resend } = this.ops.settle(auctionId, standing, frame.region);
    return { settled: settled.map(asBidSettlement), resend };
  }

  /** A pushed bidUpdate: returns { stale, settled, view } (view: the merged update). */
  onUpdate(frame) {
    const known = this.known(frame.auctionId);
    const versions = frame.versions ?? {};
    const merged = { ...(known.versions ?? {}) };
    for (const [region, count] of Object.entries(versions)) merged[region] = Math.max(merged[region] ?? 0, count);
    const high = higherBid(known.high, frame.highBid ?? null);
    const changed = !dominates(known.versions ?? {}, merged) || high !== known.high;
    if (known.versions && !changed) return { stale: true, settled: [], view: null };
    this.auctions.set(frame.auctionId, { versions: merged, high });
    const total = Object.values(merged).reduce((sum, n) => sum + n, 0);
    const view = { ...frame, highBid: high, versions: merged, bidCount: total, version: total };
    const pushed = frame.highBid;
    let settled = [];
    if (pushed && pushed.bidder === this.userId) {
      try {
        settled = this.ops.settleShown(pushed.bidId, bidDigest(pushed.amount), frame.region).map(asBidSettlement);
      } catch {
        /* an amount with no digest is no bid of mine */
      }
    }
    return { stale: false, settled, view };
  }

  /** At a heartbeat: doubtful bids past the window settle as not standing. */
  expire(now) {
    return this.ops.expire(now).map(asBidSettlement);
  }
}

/**
 * The reconnecting auction client. Events (CustomEvent detail):
 * - `status`: { state: 'connecting'|'connected'|'reconnecting'|'closed', attempt, delayMs, url }
 * - `restored`: { region, auction, you, outageMs }
 * - `update`: { region, auctionId, highBid, bidCount, version, versions } (stale ones dropped)
 * - `bidResult`: { bidId, status, reason, region, amount, doubtful }
 * - `bidSettled`: { bidId, stands, region } (the final word on a doubtful bid, see BidBook)
 * - `endpoint`: { url, regional, reason }
 * - `disconnected`: { reason }
 */
export const INITIAL_VIEW = Object.freeze({
  connection: 'connecting',
  region: null,
  auction: null,
  auctions: Object.freeze({}),
  you: null,
  outageMs: null,
  endpoint: null,
  bids: Object.freeze({}),
  // Joined topics (any app's, every op held) by topic: { copies, versions, view, complete, hole }.
  topics: Object.freeze({}),
  // Writes to topics by op id, as `bids`.
  writes: Object.freeze({}),
  lastDisconnect: null,
  lastDisconnectCode: null,
  attempt: 0,
  retryAt: null,
});

/** The view an app renders, from the client's own events (pure): what `client.state` holds
 * and what the React hook renders. */
export function reduceView(state, type, detail) {
  switch (type) {
    case 'status':
      return {
        ...state,
        connection: detail.state,
        region: detail.state === 'connected' ? (detail.region ?? state.region) : state.region,
        // `failed` is terminal: its reason stays readable (sign in again, then remount).
        lastDisconnect: detail.state === 'failed' ? detail.reason : state.lastDisconnect,
        lastDisconnectCode: detail.state === 'failed' ? (detail.code ?? null) : (state.lastDisconnectCode ?? null),
        // The attempt under way, and when a waiting retry goes (ms since the epoch: a UI
        // counts down "retrying in N s" from it).
        attempt: detail.attempt ?? state.attempt ?? 0,
        retryAt: detail.state === 'reconnecting' ? (detail.retryAt ?? null) : null,
      };
    case 'restored': {
      // A state frame replaces its auction's view: after a failover it is the new Region's
      // truth. `auction` is the client's first auction (`primary`); every watched one is in
      // `auctions` by id.
      const id = detail.auction?.id;
      const primary = detail.primary ?? true;
      return {
        ...state,
        connection: 'connected',
        region: detail.region,
        auction: primary ? detail.auction : state.auction,
        auctions: id === undefined ? (state.auctions ?? {}) : { ...(state.auctions ?? {}), [id]: detail.auction },
        you: primary || state.you === null ? detail.you : state.you,
        outageMs: detail.outageMs ?? state.outageMs,
      };
    }
    case 'update': {
      const merge = (auction) => ({
        ...auction,
        highBid: detail.highBid,
        bidCount: detail.bidCount,
        version: detail.version,
        versions: detail.versions,
      });
      const listed = state.auctions?.[detail.auctionId];
      const primary = state.auction && detail.auctionId === state.auction.id;
      if (!listed && !primary) return state;
      return {
        ...state,
        auction: primary ? merge(state.auction) : state.auction,
        auctions: listed ? { ...state.auctions, [detail.auctionId]: merge(listed) } : state.auctions,
      };
    }
    case 'bidSent':
      return { ...state, bids: { ...state.bids, [detail.bidId]: { amount: detail.amount, status: 'sent', reason: null, region: null, doubtful: false } } };
    case 'bidResult':
      return {
        ...state,
        bids: {
          ...state.bids,
          [detail.bidId]: {
            ...(state.bids[detail.bidId] ?? {}),
            amount: detail.amount ?? state.bids[detail.bidId]?.amount ?? null,
            status: detail.status,
            reason: detail.reason ?? null,
            region: detail.region,
            doubtful: detail.doubtful,
          },
        },
      };
    case 'bidSettled': {
      const bid = state.bids[detail.bidId];
      if (!bid) return state;
      return { ...state, bids: { ...state.bids, [detail.bidId]: { ...bid, doubtful: false, stands: detail.stands, region: detail.region ?? bid.region } } };
    }
    case 'bidExpired': {
      // Made offline and too old when the connection came back: never sent.
      const bid = state.bids[detail.bidId];
      if (!bid) return state;
      return { ...state, bids: { ...state.bids, [detail.bidId]: { ...bid, status: 'expired', doubtful: false } } };
    }
    case 'topicRestored':
    case 'topicUpdated': {
      const held = state.topics?.[detail.topic] ?? { copies: [], versions: {}, view: null, complete: false, hole: null };
      const seen = new Set(held.copies.map((op) => `${op.log}#${op.position}`));
      const copies = [...held.copies, ...(detail.added ?? []).filter((op) => !seen.has(`${op.log}#${op.position}`))];
      const complete = type === 'topicRestored' ? detail.complete : held.complete;
      const topic = { ...held, copies, versions: detail.versions, view: detail.view ?? held.view, complete, hole: complete ? null : held.hole };
      return {
        ...state,
        connection: type === 'topicRestored' ? 'connected' : state.connection,
        region: detail.region ?? state.region,
        outageMs: detail.outageMs ?? state.outageMs,
        topics: { ...(state.topics ?? {}), [detail.topic]: topic },
      };
    }
    case 'discontinuity': {
      const held = state.topics?.[detail.topic];
      if (!held) return state;
      return { ...state, topics: { ...state.topics, [detail.topic]: { ...held, hole: { heldTo: detail.heldTo, versions: detail.versions } } } };
    }
    case 'writeSent':
      return { ...state, writes: { ...(state.writes ?? {}), [detail.opId]: { topic: detail.topic, op: detail.op, status: 'sent', reason: null, region: null, doubtful: false } } };
    case 'writeResult': {
      const write = state.writes?.[detail.opId] ?? {};
      return {
        ...state,
        writes: { ...(state.writes ?? {}), [detail.opId]: { ...write, status: detail.status, reason: detail.reason ?? null, region: detail.region, doubtful: detail.doubtful } },
      };
    }
    case 'writeSettled': {
      const write = state.writes?.[detail.opId];
      if (!write) return state;
      return { ...state, writes: { ...state.writes, [detail.opId]: { ...write, doubtful: false, stands: detail.stands, region: detail.region ?? write.region } } };
    }
    case 'writeExpired': {
      const write = state.writes?.[detail.opId];
      if (!write) return state;
      return { ...state, writes: { ...state.writes, [detail.opId]: { ...write, status: 'expired', doubtful: false } } };
    }
    case 'endpoint':
      return { ...state, endpoint: detail };
    case 'disconnected':
      return { ...state, lastDisconnect: detail.reason, lastDisconnectCode: detail.code ?? null };
    default:
      return state;
  }
}

/** Why a session ended (4000-4099) and why the client gave up (4100-4199), as numbers both
 * clients give alike (conformance/reason_codes.json; the Rust client's `ReasonCode`): key
 * logs, metrics and UI copy by them; the reason string is for people. */
export const REASON_CODES = Object.freeze({
  heartbeat_failures: 4000,
  silent: 4001,
  server_closed: 4002,
  connect_failed: 4003,
  connect_timeout: 4004,
  socket_error: 4005,
  token_unavailable: 4006,
  client_closed: 4007,
  reconnect_asked: 4008,
  returning: 4009,
  moved: 4010,
  redirected: 4011,
  offline: 4012,
  attempts_exhausted: 4100,
  token_denied: 4101,
});

/** What a token provider throws when no token will come (the user signed out): the client
 * gives up at once (`gaveUp`, state `failed`) instead of retrying. Anything else it throws is
 * "no token for now" and retried with the backoff, like a failed connect. */
export class TokenDenied extends Error {
  constructor(message = 'no token') {
    super(message);
    this.name = 'TokenDenied';
  }
}

/** Whether the next retry is one too many: `attempt` reconnects failed in a row, `maxAttempts`
 * allowed (Infinity or null: never give up). conformance/give_up.json. */
export function givesUp(attempt, maxAttempts) {
  return maxAttempts != null && attempt >= maxAttempts;
}

/** Whether a token provider's error ends the client at once (a TokenDenied does). */
export function tokenErrorGivesUp(error) {
  return error instanceof TokenDenied || error?.name === 'TokenDenied';
}

/** The protocol name offered beside a subprotocol token (docs/AUTH.md). */
export const SUBPROTOCOL = 'wsdr';

/** Opens `url` with the token where `placement` says: `?token=` (query), or the offered
 * subprotocols `wsdr, <token>` (the server answers `wsdr`, never the token). */
export function openSocket(WebSocketClass, url, token, placement = 'query') {
  if (placement === 'subprotocol') return new WebSocketClass(url, [SUBPROTOCOL, token]);
  const separator = url.includes('?') ? '&' : '?';
  return new WebSocketClass(`${url}${separator}token=${encodeURIComponent(token)}`);
}

export class AuctionClient extends EventTarget {
  constructor(options) {
    super();
    const scale = options.timeScale ?? 1;
    this.globalUrl = options.url;
    this.tokenProvider = options.tokenProvider; // async () => token
    // Every auction this client watches over its one socket; `auctionId` is the first (the
    // view's `auction`, and `bid()`'s default).
    this.auctionIds = [...new Set([options.auctionId, ...(options.auctionIds ?? [])].filter((id) => typeof id === 'string'))];
    this.auctionId = this.auctionIds[0] ?? null;
    this.heartbeatsSent = 0;
    this.heartbeat = {
      intervalMs: (options.heartbeatIntervalMs ?? 30000) / scale,
      timeoutMs: (options.heartbeatTimeoutMs ?? 35000) / scale,
      threshold: options.failureThreshold ?? 2,
    };
    this.backoff = {
      baseMs: 2000 / scale,
      capMs: 20000 / scale,
      herdWindowMs: 20000 / scale,
      maxHerdHintMs: MAX_HERD_HINT_MS / scale,
      ...(options.backoff ?? {}),
    };
    // The herd window the serving Region last advertised (ms), or null.
    this.herdHintMs = null;
    this.stableAfterMs = 30000 / scale;
    this.maxMoveWindowMs = MAX_MOVE_WINDOW_MS / scale;
    this.connectTimeoutMs = Math.max(500, 10000 / scale);
    this.policy = options.regions?.length
      ? new FallbackPolicy({ regions: options.regions, recheckMs: 60000 / scale })
      : null;
    this.WebSocket = options.WebSocket ?? globalThis.WebSocket;
    this.tokenPlacement = options.tokenPlacement ?? 'query';
    // Reconnects before giving up (`gaveUp`); unbounded by default: a real-time app keeps trying.
    this.maxAttempts = options.maxAttempts ?? null;
    // Where `online` is announced (the browser's window); null: nowhere to listen.
    // The debug hook: ({ type, detail, at }) for every event and every frame sent ('send') and
    // received ('receive').
    this.log = typeof options.log === 'function' ? options.log : null;
    this.networkEvents = options.networkEvents ?? (typeof window !== 'undefined' ? window : null);
    this.retryTimer = null;
    this.onOnline = null;
    this.onOffline = null;
    // The browser said the network is gone: no retry runs until it says `online`.
    this.offline = false;
    this.openFailed = false;
    if (this.tokenPlacement !== 'query' && this.tokenPlacement !== 'subprotocol') {
      throw new Error(`tokenPlacement must be 'query' or 'subprotocol', not ${this.tokenPlacement}`);
    }
    this.attempt = 0;
    this.view = INITIAL_VIEW;
    this.book = new BidBook({
      settleWindowMs: (options.settleWindowMs ?? 120000) / scale,
      offline: { max: options.offlineBids?.max ?? OFFLINE_BIDS.max, maxAgeMs: (options.offlineBids?.maxAgeMs ?? OFFLINE_BIDS.maxAgeMs) / scale },
    });
    // Writes to any app's topics, by the same rules as bids (a reused op id is final).
    this.writes = new OpBook({
      settleWindowMs: (options.settleWindowMs ?? 120000) / scale,
      offline: { max: options.offlineBids?.max ?? OFFLINE_BIDS.max, maxAgeMs: (options.offlineBids?.maxAgeMs ?? OFFLINE_BIDS.maxAgeMs) / scale },
      finalReasons: ['op_id_reused'],
    });
    // Joined topics (a chat room): every op held by log and position.
    this.topicLogs = new Map();
    for (const topic of options.topics ?? []) this.topicLogs.set(topic, new TopicLog(topic));
    this.userId = null;
    this.ws = null;
    this.closed = false;
    this.outageSince = null;
    this.session = null;
  }

  emit(type, detail) {
    this.view = reduceView(this.view, type, detail);
    this.trace(type, detail);
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  /** The debug hook (`log` option): every event, and every frame sent and received. */
  trace(type, detail) {
    if (!this.log) return;
    try {
      this.log({ type, detail, at: Date.now() });
    } catch {
      // a logger's failure is not the client's
    }
  }

  /** Sends a frame on the current socket (traced as `send`). */
  send(frame) {
    this.trace('send', frame);
    this.ws.send(frame);
  }

  /** Resolves with `{ region }` when a session is connected (now, if one is); rejects if the
   * client is closed or gives up first. */
  whenConnected() {
    if (this.view.connection === 'connected' && this.session?.open && !this.session.ended) {
      return Promise.resolve({ region: this.view.region });
    }
    return new Promise((resolve, reject) => {
      const on = (event) => {
        const { state, region, reason } = event.detail;
        if (state === 'connected') {
          this.removeEventListener('status', on);
          resolve({ region });
        } else if (state === 'closed' || state === 'failed') {
          this.removeEventListener('status', on);
          reject(new Error(state === 'failed' ? `the client gave up: ${reason}` : 'the client was closed'));
        }
      };
      this.addEventListener('status', on);
    });
  }

  /** The view so far (connection, region, auction, you, bids, ...), whenever a listener
   * comes: the same reduction of the client's events the React hook renders. */
  get state() {
    return this.view;
  }

  start() {
    // The browser knows when the network comes back: a retry waiting out its backoff then
    // goes at once (the backoff spreads a fleet over a failing Region; a device that was
    // offline is not part of that herd).
    const target = this.networkEvents;
    if (target?.addEventListener && !this.onOnline) {
      this.onOnline = () => {
        this.offline = false;
        this.retryNow('the network is back');
      };
      target.addEventListener('online', this.onOnline);
      // Offline: the session cannot live (its heartbeat would take up to two rounds to say
      // so), and retries would only burn attempts: end it now and wait for `online`.
      this.onOffline = () => this.wentOffline();
      target.addEventListener('offline', this.onOffline);
    }
    this.connect();
    return this;
  }

  close() {
    this.closed = true;
    clearTimeout(this.retryTimer);
    if (this.onOnline) this.networkEvents?.removeEventListener?.('online', this.onOnline);
    if (this.onOffline) this.networkEvents?.removeEventListener?.('offline', this.onOffline);
    this.endSession('client closed', REASON_CODES.client_closed);
    this.emit('status', { state: 'closed', attempt: this.attempt });
  }

  /** Connect now: ends the current session if any (a user's "reconnect" button), or cuts a
   * retry's wait short. Nothing once the client is closed or gave up. */
  reconnect() {
    if (this.closed) return;
    if (this.session && !this.session.ended) {
      this.attempt = 0;
      this.endSession('reconnect asked', REASON_CODES.reconnect_asked, false, true, true);
      return;
    }
    this.retryNow('reconnect asked');
  }

  /** A retry waiting out its backoff goes now. */
  /** The browser's `offline`: end the session, hold retries until `online`. */
  wentOffline() {
    if (this.closed) return;
    this.offline = true;
    if (this.session && !this.session.ended) {
      this.endSession('the network went away', REASON_CODES.offline, false);
    } else if (this.retryTimer !== null && this.retryTimer !== undefined) {
      clearTimeout(this.retryTimer);
      this.retryTimer = undefined;
      this.failed('the network went away', REASON_CODES.offline, false);
    }
  }

  retryNow(reason) {
    if (this.closed || this.retryTimer === null || this.retryTimer === undefined) return;
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.emit('status', { state: 'reconnecting', attempt: this.attempt, delayMs: 0, reason });
    this.connect();
  }

  /** Watch one more auction over this socket: its state now (if connected) and after every
   * reconnect, its versions in the heartbeats, its pushes in `update` and `state.auctions`. */
  watch(auctionId) {
    if (typeof auctionId !== 'string' || auctionId === '') throw new Error('auctionId must be a non-empty string');
    if (this.auctionIds.includes(auctionId)) return;
    this.auctionIds.push(auctionId);
    if (this.auctionId === null) this.auctionId = auctionId;
    if (this.session?.open && !this.session.ended) this.send(this.book.stateRequest(auctionId));
  }

  /** Hold every op of `topic` (any app's, `<namespace>:<name>`: a chat room) over this socket:
   * read from the positions held after every reconnect, holes asked for and reported
   * (`discontinuity`), its versions in the heartbeats; copies arrive in `topicRestored` and
   * `topicUpdated` and in `state.topics[topic]`. */
  join(topic) {
    if (typeof topic !== 'string' || !/^[A-Za-z0-9_-]{1,32}:./.test(topic)) throw new Error('topic must be `<namespace>:<name>`');
    if (this.topicLogs.has(topic)) return;
    this.topicLogs.set(topic, new TopicLog(topic));
    if (this.session?.open && !this.session.ended) this.send(this.topicRequest(topic));
  }

  /** The `getState` of a joined topic, naming its doubtful writes. */
  topicRequest(topic) {
    return this.topicLogs.get(topic).request(this.writes.doubtsOf(topic));
  }

  /** Write `op` (any JSON value with a canonical form) to `topic`, which is joined from now on
   * (its state settles the write). Replayed with the same op id after every reconnect until
   * answered (`writeResult`), settled like a bid when the answer cannot be final
   * (`writeSettled`). Returns the op id. */
  write(topic, op) {
    const digest = opDigest(op);
    this.join(topic);
    const opId = newBidId();
    const frame = JSON.stringify({ action: 'write', topic, opId, op });
    const open = Boolean(this.session?.open);
    this.writes.add(opId, frame, digest, open, Date.now(), topic);
    this.emit('writeSent', { opId, topic, op });
    if (open) this.send(frame);
    return opId;
  }

  /** Send a bid (amount in integer minor units) in `auctionId` (default: the first auction;
   * another is watched from now on). Returns the bidId. */
  bid(amount, auctionId = this.auctionId) {
    if (!Number.isSafeInteger(amount) || amount <= 0) throw new Error('amount must be a positive integer');
    if (auctionId === null) throw new Error('no auction to bid in: pass an auctionId');
    this.watch(auctionId);
    const bidId = newBidId();
    const frame = JSON.stringify({ action: 'bid', auctionId, amount, bidId });
    const open = Boolean(this.session?.open);
    this.book.add(bidId, frame, amount, open, Date.now());
    this.emit('bidSent', { bidId, amount });
    if (open) this.send(frame);
    return bidId;
  }

  async connect() {
    if (this.closed) return;
    const url = this.policy ? this.policy.url(this.globalUrl) : this.globalUrl;
    this.emit('status', { state: 'connecting', attempt: this.attempt, url });
    let token;
    try {
      // `refresh`: the last attempt never opened. A browser cannot see a handshake's status,
      // so a refused token (401/403) and a network failure look alike: a provider that caches
      // should fetch a new token then.
      token = await this.tokenProvider({ refresh: this.openFailed === true });
    } catch (error) {
      if (tokenErrorGivesUp(error)) {
        this.giveUp(`the token provider gave up: ${error.message ?? error}`, REASON_CODES.token_denied);
        return;
      }
      this.failed(`token provider failed: ${error}`, REASON_CODES.token_unavailable, true);
      return;
    }
    if (this.closed) return;
    let ws;
    try {
      ws = openSocket(this.WebSocket, url, token, this.tokenPlacement);
    } catch (error) {
      this.failed(`cannot open: ${error}`, REASON_CODES.connect_failed, true);
      return;
    }
    this.ws = ws;
    const session = {
      open: false,
      region: null,
      tracker: new HeartbeatTracker(this.heartbeat),
      // When the last frame arrived, by the monotonic clock and by the wall clock: a
      // machine that slept shows as wall time far ahead of monotonic time.
      lastRx: performance.now(),
      lastRxWall: Date.now(),
      timer: null,
      recheck: null,
      probing: false,
      connectedAt: 0,
      ended: false,
      moving: null,
      moveTimer: null,
      // Ends a session that never opened; cleared by its end however it ends (a socket
      // closed before it opened need not call back).
      connectTimer: null,
      // The outage this session ended (set by its first state), and the auctions restored.
      outageMs: undefined,
      restored: new Set(),
    };
    this.session = session;
    session.connectTimer = setTimeout(() => {
      if (!session.open) this.endSession('connect timeout', REASON_CODES.connect_timeout, true);
    }, this.connectTimeoutMs);
    ws.onopen = () => {
      clearTimeout(session.connectTimer);
      session.open = true;
      this.openFailed = false;
      session.connectedAt = Date.now();
      for (const auctionId of this.auctionIds) this.send(this.book.stateRequest(auctionId));
      for (const topic of this.topicLogs.keys()) this.send(this.topicRequest(topic));
      for (const bidId of this.book.expireOffline(Date.now())) this.emit('bidExpired', { bidId });
      for (const frame of this.book.replay()) this.send(frame);
      for (const opId of this.writes.expireOffline(Date.now())) this.emit('writeExpired', { opId });
      for (const frame of this.writes.replay()) this.send(frame);
      this.schedule(this.heartbeat.intervalMs);
      if (this.policy) {
        session.recheck = setInterval(() => this.probeGlobal(), this.policy.recheckMs);
      }
    };
    ws.onmessage = (message) => this.onFrame(message.data);
    ws.onerror = () => {};
    ws.onclose = (event) => {
      clearTimeout(session.connectTimer);
      if (session.ended) return;
      // A clean close (1000, 1001: the 2-hour limit, a deploy) is not a failure.
      const clean = event.code === 1000 || event.code === 1001;
      if (session.open) {
        this.endSession(`closed (${event.code})`, REASON_CODES.server_closed, !clean, clean, false, event.code);
      } else {
        this.endSession('connect failed', REASON_CODES.connect_failed, !clean, clean, false, event.code);
      }
    };
  }

  schedule(ms) {
    const session = this.session;
    clearTimeout(session.timer);
    session.timer = setTimeout(() => this.tick(), ms);
  }

  tick() {
    const session = this.session;
    if (!session || session.ended) return;
    const verdict = session.tracker.onTick(performance.now() - session.lastRx, Date.now() - session.lastRxWall);
    if (verdict.broken) {
      this.endSession(verdict.reason, verdict.reason === 'silent' ? REASON_CODES.silent : REASON_CODES.heartbeat_failures, true);
      return;
    }
    // Naming the watched auctions in turn: the pong carries the named one's versions, so a
    // missed push shows (as the Rust client does).
    // Then the joined topics, in the same turn.
    const named = [...this.auctionIds.map((auctionId) => ({ auctionId })), ...[...this.topicLogs.keys()].map((topic) => ({ topic }))];
    const heartbeat = { action: 'heartbeat', ...named[this.heartbeatsSent % Math.max(named.length, 1)] };
    this.heartbeatsSent += 1;
    this.send(JSON.stringify(heartbeat));
    // Doubtful bids: settle the expired ones, look again at the rest (one getState for each
    // auction that has some); doubtful writes alike, per topic.
    for (const settled of this.book.expire(Date.now())) this.emit('bidSettled', settled);
    for (const auctionId of this.book.doubtfulAuctions()) this.send(this.book.stateRequest(auctionId));
    for (const settled of this.writes.expire(Date.now())) this.emit('writeSettled', settled);
    // A write joins its topic: every doubtful write's topic is held.
    for (const topic of this.writes.doubtfulTopics()) this.send(this.topicRequest(topic));
    this.schedule(verdict.nextInMs);
    if (Date.now() - session.connectedAt >= this.stableAfterMs) this.attempt = 0;
  }

  onFrame(text) {
    const session = this.session;
    if (!session || session.ended) return;
    this.trace('receive', text);
    session.lastRx = performance.now();
    session.lastRxWall = Date.now();
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return; // unreadable frames are ignored
    }
    if (isInternalError(frame)) {
      const verdict = session.tracker.onErrorFrame();
      if (verdict.broken) this.endSession('heartbeat failures', REASON_CODES.heartbeat_failures, true);
      else if (verdict.nextInMs !== null) this.schedule(verdict.nextInMs);
      return;
    }
    if (session.region === null && typeof frame.region === 'string') {
      session.region = frame.region;
      this.emit('status', { state: 'connected', attempt: this.attempt, region: frame.region });
    }
    switch (frame.type) {
      case 'pong':
        session.tracker.onPong();
        this.herdHintMs = Number.isFinite(frame.herdWindowMs) ? frame.herdWindowMs : null;
        // The Region has seen bids this view has not (a push lost or still on its way).
        if (this.auctionIds.includes(frame.auctionId) && frame.versions && this.book.behind(frame.versions, frame.auctionId)) {
          this.send(this.book.stateRequest(frame.auctionId));
        }
        // A joined topic's counts past a hole the client has: ask (not the same fruitless question).
        if (this.topicLogs.has(frame.topic) && frame.versions) {
          const log = this.topicLogs.get(frame.topic);
          log.counted(frame.versions);
          if (log.isBehind(frame.versions) && log.worthAsking()) this.send(this.topicRequest(frame.topic));
        }
        break;
      case 'moveTo': {
        if (session.moving) break;
        const order = decideMove(frame, {
          servingRegion: frame.region,
          globalUrl: this.globalUrl,
          regions: this.policy?.regions ?? [],
          maxWindowMs: this.maxMoveWindowMs,
        });
        if (order.ignored) break;
        session.moving = order;
        this.emit('moveScheduled', { to: order.to, afterMs: order.afterMs, reason: frame.reason ?? '' });
        session.moveTimer = setTimeout(() => this.move(order), order.afterMs);
        break;
      }
      case 'state': {
        this.herdHintMs = Number.isFinite(frame.herdWindowMs) ? frame.herdWindowMs : null;
        // The outage ends with this session's first state; each auction's first state of the
        // session reports it (a resync within the session reports none).
        const auctionId = frame.auction?.id;
        const outageMs = this.restoredOutage(session, auctionId);
        this.policy?.onRestored(frame.region);
        const { settled, resend } = this.book.onState(frame);
        this.emit('restored', {
          region: frame.region,
          auction: frame.auction,
          you: frame.you,
          outageMs,
          primary: frame.auction?.id === this.auctionId,
        });
        for (const s of settled) this.emit('bidSettled', s);
        for (const f of resend) this.send(f);
        break;
      }
      case 'topicState': {
        const log = this.topicLogs.get(frame.topic);
        if (!log) break;
        this.herdHintMs = Number.isFinite(frame.herdWindowMs) ? frame.herdWindowMs : null;
        const outageMs = this.restoredOutage(session, `topic:${frame.topic}`);
        this.policy?.onRestored(frame.region);
        const merged = log.merge(frame.versions, frame.view, frame.ops);
        const next = log.answered(merged, frame.complete === true);
        this.userId = frame.you?.userId ?? this.userId;
        const mine = (op) => op.author === this.userId;
        const standing = new Set([
          // Stryker disable next-line ArrayDeclaration: a made-up element is no settled entry (its key names no digest, which every write has), so it settles nothing.
          ...(frame.you?.settled ?? []).flatMap((s) => (s.copies ?? []).map((c) => `${s.opId}/${c.digest}`)),
          // Stryker disable next-line ArrayDeclaration: a made-up element is no op of the user's (it has no author), so the filter drops it.
          ...[...(frame.you?.ops ?? []), ...merged.added].filter(mine).map((op) => `${op.opId}/${op.digest}`),
        ]);
        const { settled, resend } = this.writes.settle(frame.topic, standing, frame.region);
        if (next === 'again') this.send(this.topicRequest(frame.topic));
        else if (next !== 'done') this.emit('discontinuity', { topic: frame.topic, region: frame.region, heldTo: next.hole, versions: { ...log.versions } });
        this.emit('topicRestored', { topic: frame.topic, region: frame.region, versions: { ...log.versions }, view: frame.view ?? null, added: merged.added, complete: frame.complete === true, outageMs });
        for (const s of settled) this.emit('writeSettled', s);
        for (const f of resend) this.send(f);
        break;
      }
      case 'topicUpdate': {
        const log = this.topicLogs.get(frame.topic);
        if (!log) break;
        const merged = log.merge(frame.versions, frame.view, frame.ops);
        for (const op of merged.added) {
          if (op.author === this.userId) for (const s of this.writes.settleShown(op.opId, op.digest, frame.region)) this.emit('writeSettled', s);
        }
        if (merged.behind && log.worthAsking()) this.send(this.topicRequest(frame.topic));
        if (merged.added.length) this.emit('topicUpdated', { topic: frame.topic, region: frame.region, versions: { ...log.versions }, view: frame.view ?? null, added: merged.added });
        break;
      }
      case 'writeResult': {
        const { doubtful } = this.writes.onResult(frame.opId, frame.status, frame.reason, Date.now());
        this.emit('writeResult', { ...frame, doubtful });
        if (frame.status === 'redirect') this.redirect(frame.region);
        break;
      }
      case 'bidUpdate': {
        const { stale, settled, view } = this.book.onUpdate(frame);
        if (!stale) this.emit('update', view);
        for (const s of settled) this.emit('bidSettled', s);
        break;
      }
      case 'bidResult': {
        // The bidder gets no bidUpdate for its own bid: the amount travels with the result.
        const { amount, doubtful } = this.book.onResult(frame, Date.now());
        this.emit('bidResult', { ...frame, amount, doubtful });
        if (frame.status === 'redirect') this.redirect(frame.region);
        break;
      }
      case 'error':
        if (frame.code === 'no_quorum') this.redirect(frame.region);
        break;
      default:
        break;
    }
  }

  /** The outage this session ended, for the first state of `key` (an auction, or a topic) in
   * the session; null for the others (a resync within the session reports none). */
  restoredOutage(session, key) {
    if (session.outageMs === undefined) {
      session.outageMs = this.outageSince === null ? null : Date.now() - this.outageSince;
      this.outageSince = null;
    }
    const outageMs = session.restored.has(key) ? null : session.outageMs;
    session.restored.add(key);
    return outageMs;
  }

  /** Strong mode: the serving Region cannot reach its table's quorum. Go to another Region's
   * own endpoint at once if one is configured (else the global name, after the backoff); the
   * unanswered bids go with the client. */
  redirect(region) {
    const session = this.session;
    if (!session || session.ended) return;
    if (this.policy?.redirectFrom(region)) {
      this.emit('endpoint', {
        url: this.policy.url(this.globalUrl),
        regional: true,
        reason: `${region} cannot reach its table's quorum`,
      });
      this.attempt = 0;
      this.endSession(`redirected from ${region}`, REASON_CODES.redirected, false, true, true);
    } else {
      this.endSession(`redirected from ${region}`, REASON_CODES.redirected, false);
    }
  }

  /** End the current session; `failure` counts against the endpoint; reconnect unless closed. */
  /** Follow a server-directed move: point the next connect at it, end this session, and
   * reconnect at once (the server already spread the moves over its window). */
  move(order) {
    const session = this.session;
    if (!session || session.ended) return;
    this.policy?.moveTo(order.target);
    this.emit('endpoint', {
      url: this.policy ? this.policy.url(this.globalUrl) : this.globalUrl,
      regional: order.target !== null && Boolean(this.policy),
      reason: `the server moved this client to ${order.to}`,
    });
    this.attempt = 0;
    this.endSession(`moved to ${order.to}`, REASON_CODES.moved, false, true, true);
  }

  endSession(reason, code, failure = false, clean = false, immediate = false, closeCode = null) {
    const session = this.session;
    if (!session || session.ended) return;
    session.ended = true;
    clearTimeout(session.connectTimer);
    clearTimeout(session.moveTimer);
    clearTimeout(session.timer);
    clearInterval(session.recheck);
    try {
      this.ws.close(1000);
    } catch {
      // already closed
    }
    if (this.closed) return;
    this.emit('disconnected', closeCode === null || closeCode === undefined ? { reason, code } : { reason, code, closeCode });
    this.failed(reason, code, failure, clean, immediate);
  }

  failed(reason, code, failure, clean = false, immediate = false) {
    if (this.closed) return;
    if (this.outageSince === null) this.outageSince = Date.now();
    if (!this.session?.open) this.openFailed = true;
    if (failure && this.policy?.onFailure()) {
      this.emit('endpoint', {
        url: this.policy.url(this.globalUrl),
        regional: this.policy.onFallback,
        reason: `${this.policy.afterFailures} consecutive failures`,
      });
      // Backoff is per endpoint: the new one has not failed yet, so its first connect draws
      // from the first window (as crates/client/src/client.rs does).
      this.attempt = 0;
    }
    if (clean) this.attempt = 0;
    // An unplanned loss may be the whole Region's: the first retry spreads over the herd hint.
    const advertisedHerdMs = clean ? 0 : this.herdHintMs;
    if (this.offline) {
      // No retry until the browser says `online` (retryNow then goes at once).
      clearTimeout(this.retryTimer);
      this.retryTimer = 0;
      this.emit('status', { state: 'reconnecting', attempt: this.attempt, delayMs: null, retryAt: null, reason, code });
      return;
    }
    if (givesUp(this.attempt, this.maxAttempts)) {
      this.giveUp(`${this.attempt} reconnect attempts failed (${reason})`, REASON_CODES.attempts_exhausted);
      return;
    }
    const delayMs = immediate ? 0 : backoffDelay(this.attempt, { ...this.backoff, advertisedHerdMs });
    this.attempt += 1;
    this.emit('status', { state: 'reconnecting', attempt: this.attempt, delayMs, retryAt: Date.now() + delayMs, reason, code });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.connect();
    }, delayMs);
  }

  /** Stops for good: `gaveUp` with the reason, then the terminal status `failed`. */
  giveUp(reason, code) {
    this.closed = true;
    this.emit('gaveUp', { reason, code });
    this.emit('status', { state: 'failed', attempt: this.attempt, reason, code });
  }

  /** Client-assisted failover: is the global name healthy, and which Region answers it? */
  async probeGlobal() {
    const session = this.session;
    if (!this.policy?.onFallback || !session || session.probing) return;
    session.probing = true;
    const region = await new Promise((resolve) => {
      let done = false;
      const finish = (value, ws) => {
        if (done) return;
        done = true;
        try {
          ws?.close(1000);
        } catch {
          // already closed
        }
        resolve(value);
      };
      Promise.resolve(this.tokenProvider({ refresh: false }))
        .then((token) => {
          const ws = openSocket(this.WebSocket, this.globalUrl, token, this.tokenPlacement);
          setTimeout(() => finish(null, ws), 2 * this.connectTimeoutMs);
          ws.onopen = () => ws.send(JSON.stringify({ action: 'heartbeat' }));
          ws.onmessage = (m) => {
            try {
              const frame = JSON.parse(m.data);
              finish(frame.type === 'pong' ? frame.region : null, ws);
            } catch {
              finish(null, ws);
            }
          };
          ws.onclose = () => finish(null, ws);
          ws.onerror = () => finish(null, ws);
        })
        .catch(() => finish(null, null));
    });
    session.probing = false;
    if (session.ended) return;
    const decision = this.policy.onProbe(region, session.region);
    if (decision === 'adopt-global') {
      this.emit('endpoint', { url: this.globalUrl, regional: false, reason: 'the global name leads to this Region again' });
    } else if (decision === 'return') {
      this.emit('endpoint', { url: this.globalUrl, regional: false, reason: 'the global name has been healthy long enough' });
      this.attempt = 0;
      this.endSession('returning to the global name', REASON_CODES.returning, false, true);
    }
  }
}
