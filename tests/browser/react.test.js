// The package's React hook (`useWsdr`) in headless Debian chromium against `wsdr lab`: it
// renders the live auction and the serving Region, a bid is accepted, and when the primary is
// throttled the same component shows the secondary serving the same high bid. The app is
// bundled with esbuild and served by a small server of its own on loopback, which passes the
// lab's token and config requests through (an app's server hands out its users' tokens the
// same way). Run by `make test` (make browser-test).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { createServer } from 'node:http';
import { build } from 'esbuild';
import { launchBrowser, root, startLab } from './lab.js';

const shots = path.join(root, 'target/browser');
mkdirSync(shots, { recursive: true });

let lab;
let base;
let browser;
let app;
let server;

before(async () => {
  const built = await build({
    entryPoints: [path.join(root, 'tests/browser/react-app.js')],
    bundle: true,
    format: 'esm',
    target: 'es2022',
    write: false,
    // web/react.js finds react where the tests pinned it.
    nodePaths: [path.join(root, 'tests/browser/node_modules')],
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'silent',
  });
  const bundle = built.outputFiles[0].text;
  ({ child: lab, url: base } = await startLab());
  const page = '<!doctype html><meta charset="utf-8"><title>wsdr + React</title><div id="root"></div><script type="module" src="/react-app.bundle.js"></script>';
  server = createServer(async (request, response) => {
    const url = new URL(request.url, 'http://app');
    if (url.pathname === '/react-app.html') {
      response.writeHead(200, { 'content-type': 'text/html' }).end(page);
    } else if (url.pathname === '/react-app.bundle.js') {
      response.writeHead(200, { 'content-type': 'text/javascript' }).end(bundle);
    } else if (request.method === 'GET' && (url.pathname === '/api/config' || url.pathname === '/api/token')) {
      const answer = await fetch(`${base}${url.pathname}${url.search}`);
      response.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'text/plain' }).end(await answer.text());
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  app = `http://127.0.0.1:${server.address().port}`;
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  server?.close();
  lab?.kill('SIGTERM');
});

test('the React hook shows the live auction and survives a failover', async () => {
  const page = await browser.newPage({ viewport: { width: 900, height: 600 } });
  const errors = [];
  page.on('pageerror', (error) => errors.push(String(error)));
  // Count the sockets the page opens: the provider's two components must share one.
  await page.addInitScript(() => {
    const Native = window.WebSocket;
    window.__sockets = 0;
    window.WebSocket = class extends Native {
      constructor(...args) {
        super(...args);
        window.__sockets += 1;
      }
    };
  });
  await page.goto(`${app}/react-app.html?user=erin`);

  await page.waitForSelector('#connection[data-state="connected"]');
  await page.waitForSelector('#region[data-region="us-east-1"]');
  const high = Number((await page.locator('#high-bid').getAttribute('data-amount')) || '100000');
  const amount = high + 2500;
  await page.fill('#amount', String(amount));
  await page.keyboard.press('Enter');
  await page.waitForSelector(`#bids li[data-amount="${amount}"][data-status="accepted"][data-region="us-east-1"]`);
  await page.waitForSelector(`#high-bid[data-amount="${amount}"][data-bidder="erin"]`);
  await page.waitForSelector(`#badge[data-amount="${amount}"]`);
  // A third component watches lot-2 over the same socket and bids there.
  await page.waitForSelector('#other-lot[data-id="lot-2"]');
  const next = await page.locator('#other-bid').getAttribute('data-next');
  await page.click('#other-bid');
  await page.waitForSelector(`#other-lot[data-amount="${next}"]`);
  assert.equal(await page.locator('#high-bid').getAttribute('data-amount'), String(amount), 'lot-1 untouched by the lot-2 bid');
  assert.equal(await page.evaluate(() => window.__sockets), 1, 'three components, two auctions, one socket');
  await page.screenshot({ path: path.join(shots, 'react-1-bid-on-primary.png') });

  const fault = await fetch(`${base}/api/fault`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ kind: 'throttle', region: 0 }),
  });
  assert.equal(fault.status, 200, await fault.text());
  await page.waitForSelector('#region[data-region="us-west-2"]', { timeout: 60000 });
  await page.waitForSelector('#connection[data-state="connected"]');
  await page.waitForSelector(`#high-bid[data-amount="${amount}"][data-bidder="erin"]`);
  assert.match(await page.locator('#outage').textContent(), /restored after \d+ ms/);
  await page.screenshot({ path: path.join(shots, 'react-2-failed-over.png') });

  // A bid on the secondary, through the same hook.
  await page.fill('#amount', String(amount + 2500));
  await page.keyboard.press('Enter');
  await page.waitForSelector(`#bids li[data-amount="${amount + 2500}"][data-status="accepted"][data-region="us-west-2"]`);
  await page.waitForSelector(`#high-bid[data-amount="${amount + 2500}"]`);
  assert.deepEqual(errors, []);
});
