// An op's canonical JSON beyond the shared vectors: what only JavaScript can hand it (undefined,
// functions, class instances, lone surrogates) and the nesting bound.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalJson, opDigest } from '../wsdr-client.js';

const nested = (levels, wrap) => {
  let v = 0;
  for (let i = 0; i < levels; i += 1) v = wrap(v);
  return v;
};

test('nesting: 64 levels of arrays or objects have a canonical form, 65 do not', () => {
  assert.doesNotThrow(() => canonicalJson(nested(64, (v) => [v])));
  assert.throws(() => canonicalJson(nested(65, (v) => [v])), /deeper than 64/);
  assert.doesNotThrow(() => canonicalJson(nested(64, (v) => ({ k: v }))));
  assert.throws(() => canonicalJson(nested(65, (v) => ({ k: v }))), /deeper than 64/);
});

test('numbers: only exact integers, and the error names the rule', () => {
  assert.equal(canonicalJson(-0), '0');
  assert.throws(() => canonicalJson(0.5), /integers of at most 9007199254740991/);
  assert.throws(() => canonicalJson(Number.MAX_SAFE_INTEGER + 1), /integers/);
  assert.throws(() => canonicalJson(NaN), /integers/);
  assert.throws(() => canonicalJson(Infinity), /integers/);
});

test('strings and keys: lone surrogates refused, escapes as JSON.stringify writes them', () => {
  assert.throws(() => canonicalJson('a\ud800'), /well-formed Unicode/);
  assert.throws(() => canonicalJson({ ['k\udc00']: 1 }), /well-formed Unicode/);
  assert.equal(canonicalJson({ 'q"k': 'v\n' }), '{"q\\"k":"v\\n"}');
});

test('objects: plain ones only; members that are undefined are left out, as in the frame', () => {
  assert.equal(canonicalJson({ b: 1, a: undefined }), '{"b":1}');
  assert.equal(canonicalJson(Object.assign(Object.create(null), { z: true, y: null })), '{"y":null,"z":true}');
  for (const value of [new Date(0), new Map(), new (class Point { constructor() { this.x = 1; } })()]) {
    assert.throws(() => canonicalJson(value), /plain objects/, String(value));
  }
  for (const value of [undefined, () => 1, 1n, Symbol('s')]) {
    assert.throws(() => canonicalJson(value), /cannot carry a value of type/, typeof value);
  }
  assert.throws(() => canonicalJson([undefined]), /type undefined/, 'inside an array it has no form either');
});

test('the digest is of the canonical form: 32 hex digits, equal for equal forms', () => {
  assert.match(opDigest({ a: 1 }), /^[0-9a-f]{32}$/);
  assert.equal(opDigest({ a: 1, b: undefined }), opDigest({ a: 1 }));
  assert.notEqual(opDigest({ a: 1 }), opDigest({ a: '1' }));
});
