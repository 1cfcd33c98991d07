// The package's React layer (`wsdr-client/react`) rendered on the server (react-dom/server in
// Node): a provider and the components under it render the initial view without opening a
// socket, a hook that is not enabled renders `idle`, and `useWsdr()` outside a provider says
// what it needs. Bundled by esbuild (web/react.js finds react where the tests pinned it).
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { root } from './lab.js';

let ssr;

before(async () => {
  const entry = `
    export * from ${JSON.stringify(path.join(root, 'web/react.js'))};
    export { createElement } from 'react';
    export { renderToString } from 'react-dom/server';
  `;
  const built = await build({
    stdin: { contents: entry, resolveDir: root, loader: 'js' },
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    write: false,
    nodePaths: [path.join(root, 'tests/browser/node_modules')],
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'silent',
    // react-dom/server is CommonJS and requires Node's builtins.
    banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
  });
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'wsdr-ssr-')), 'react-ssr.mjs');
  writeFileSync(file, built.outputFiles[0].text);
  ssr = await import(pathToFileURL(file).href);
});

const options = {
  url: 'wss://auction.example.com',
  auctionId: 'lot-1',
  tokenProvider: async () => 'token',
};

test('a provider and its consumers render on the server without a socket', () => {
  const { createElement: h, renderToString, useWsdr, WsdrProvider } = ssr;
  let sockets = 0;
  globalThis.WebSocket = class {
    constructor() {
      sockets += 1;
    }
  };
  function Status({ id }) {
    const { connection, auction } = useWsdr();
    return h('p', { id }, `${connection}:${auction === null ? 'none' : auction.id}`);
  }
  const html = renderToString(h(WsdrProvider, options, h(Status, { id: 'a' }), h(Status, { id: 'b' })));
  assert.equal(html, '<p id="a">connecting:none</p><p id="b">connecting:none</p>');
  assert.equal(sockets, 0, 'no socket on the server');
  delete globalThis.WebSocket;
});

test('a hook that is not enabled is idle, and a provider can be too', () => {
  const { createElement: h, renderToString, useWsdr, WsdrProvider } = ssr;
  function Own() {
    return h('p', null, useWsdr({ ...options, enabled: false }).connection);
  }
  function Shared() {
    return h('p', null, useWsdr().connection);
  }
  assert.equal(renderToString(h(Own)), '<p>idle</p>');
  assert.equal(renderToString(h(WsdrProvider, { ...options, enabled: false }, h(Shared))), '<p>idle</p>');
});

test('useWsdr() without options outside a provider says what it needs', () => {
  const { createElement: h, renderToString, useWsdr } = ssr;
  function Lost() {
    return h('p', null, useWsdr().connection);
  }
  assert.throws(() => renderToString(h(Lost)), /needs a <WsdrProvider>/);
});
