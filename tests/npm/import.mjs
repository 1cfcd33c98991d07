// Run inside the scratch project that installed the packed tarball: both entries import,
// and each module exports exactly the values its declarations declare (a value added to one
// and not the other fails here).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as client from 'wsdr-client';
import * as react from 'wsdr-client/react';

const require = createRequire(import.meta.url);
const root = require.resolve('wsdr-client/package.json').replace(/package\.json$/, '');
const declared = (file) =>
  [...readFileSync(`${root}${file}`, 'utf8').matchAll(/^export declare (?:const|function|class) (\w+)/gm)]
    .map((m) => m[1])
    .sort();

assert.deepEqual(Object.keys(client).sort(), declared('wsdr-client.d.ts'), 'wsdr-client exports = declarations');
assert.deepEqual(Object.keys(react).sort(), declared('react.d.ts'), 'wsdr-client/react exports = declarations');

// The installed code works: a rule and the hook's reducer.
assert.equal(client.backoffDelay(0, { jitter: false }), 2000);
const state = react.reduce(
  { connection: 'connecting', region: null, auction: null, you: null, outageMs: null, endpoint: null, bids: {}, lastDisconnect: null },
  'status',
  { state: 'connected', attempt: 0, region: 'us-west-2' },
);
assert.equal(state.region, 'us-west-2');
console.log(`wsdr-client: ${Object.keys(client).length} exports, wsdr-client/react: ${Object.keys(react).length}, as declared`);
