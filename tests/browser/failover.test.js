// The control room page in headless Debian chromium: place a bid, throttle the primary, see
// the badge switch to the secondary with the same high bid, heal, see failback.
// Screenshots go to target/browser/. Run by `make test` (make browser-test).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { launchBrowser, root, startLab } from './lab.js';

const shots = path.join(root, 'target/browser');
mkdirSync(shots, { recursive: true });

let lab;
let base;
let browser;

async function status() {
  return (await fetch(`${base}/api/status`)).json();
}

before(async () => {
  ({ child: lab, url: base } = await startLab());
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  lab?.kill('SIGTERM');
});

test('a bid survives a failover and the page shows the Region switch and the failback', async () => {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors = [];
  page.on('pageerror', (error) => errors.push(String(error)));
  await page.goto(`${base}/?user=alice`);

  const badge = page.locator('#region-badge');
  await page.waitForFunction(() => document.querySelector('#region-badge').textContent === 'us-east-1');
  await page.waitForFunction(() => document.querySelector('#last-restore').textContent.startsWith('state restored'));

  // Bid above the current high, with the keyboard only.
  const high = Number((await page.locator('#high-bid').getAttribute('data-amount')) || '100000');
  const dollars = Math.floor(high / 100) + 25;
  await page.focus('#bid-amount');
  await page.keyboard.type(String(dollars));
  await page.keyboard.press('Enter');
  await page.waitForSelector('#bid-result[data-status="accepted"]');
  await page.waitForSelector(`#high-bid[data-amount="${dollars * 100}"]`);
  assert.match(await page.locator('#bid-result').textContent(), /accepted by us-east-1/);
  assert.equal(await page.locator('#high-bidder').textContent(), 'alice');
  await page.screenshot({ path: path.join(shots, '1-bid-on-primary.png') });

  // A second user whose page knows only the global name (DNS-only failover).
  const dnsOnly = await browser.newPage();
  dnsOnly.on('pageerror', (error) => errors.push(String(error)));
  await dnsOnly.goto(`${base}/?user=bob&fallback=0`);
  await dnsOnly.waitForFunction(() => document.querySelector('#region-badge').textContent === 'us-east-1');
  await dnsOnly.waitForSelector(`#high-bid[data-amount="${dollars * 100}"]`);

  // The chat room beside the auction, on the same socket: alice's message reaches bob.
  const post = async (text) => {
    await page.fill('#room-text', text);
    await page.keyboard.press('Enter');
    await page.waitForFunction((t) => [...document.querySelectorAll('#room-messages li')].some((li) => li.textContent.startsWith(`alice: ${t}`)), text, { timeout: 60000 });
  };
  const roomOf = (p) => p.locator('#room-messages li').evaluateAll((items) => items.map((li) => li.textContent.replace(/ \(.*\)$/, '')));
  await post('hello from the primary');
  assert.match(await page.locator('#room-result').textContent(), /accepted by us-east-1/);
  await dnsOnly.waitForFunction(() => [...document.querySelectorAll('#room-messages li')].some((li) => li.textContent.startsWith('alice: hello from the primary')));

  // The reference game day: throttle the primary from the control room.
  await page.getByRole('button', { name: 'Throttle' }).click();
  await page.waitForFunction(() => document.querySelector('#region-badge').textContent === 'us-west-2', null, { timeout: 60000 });
  await page.waitForFunction(() => document.querySelector('#last-restore').textContent.includes('from us-west-2'), null, { timeout: 60000 });
  assert.equal(await badge.getAttribute('data-region'), 'us-west-2');
  assert.equal(await page.locator('#high-bid').getAttribute('data-amount'), String(dollars * 100), 'the same high bid, served by the secondary');
  assert.equal(await page.locator('#high-bidder').textContent(), 'alice');
  await page.screenshot({ path: path.join(shots, '2-failed-over-to-secondary.png') });
  assert.match(await page.locator('#conn-endpoint').textContent(), /regional fallback|global name/);

  // The DNS-only page follows once the fast verdict has failed the primary over and the name
  // resolves elsewhere.
  await dnsOnly.waitForFunction(() => document.querySelector('#region-badge').textContent === 'us-west-2', null, { timeout: 60000 });
  await dnsOnly.waitForSelector(`#high-bid[data-amount="${dollars * 100}"]`);
  assert.equal(await dnsOnly.locator('#conn-endpoint').textContent(), 'global name');
  await dnsOnly.screenshot({ path: path.join(shots, '2b-dns-only-page-failed-over.png') });
  // The room on the secondary: the message from before the failover is there, a new one is
  // taken by the secondary, and both pages show the same room in the same order.
  await post('hello from the secondary');
  assert.match(await page.locator('#room-result').textContent(), /accepted by us-west-2/);
  await dnsOnly.waitForFunction(() => [...document.querySelectorAll('#room-messages li')].some((li) => li.textContent.startsWith('alice: hello from the secondary')), null, { timeout: 60000 });
  const room = await roomOf(page);
  assert.deepEqual(room.slice(-2), ['alice: hello from the primary', 'alice: hello from the secondary']);
  assert.deepEqual(await roomOf(dnsOnly), room, 'one room, one order, on both pages');

  // The control room sees the failover too: each Region's own canary, labelled; the fault,
  // the fast verdict, the endpoint check and the DNS flip in the key events (wsdr's defaults:
  // the alarm comes minutes later); the fault banner; connections per Region.
  await page.waitForFunction(() => document.querySelector('#dns-answer').textContent === 'us-west-2', null, { timeout: 60000 });
  const primaryCard = page.locator('#region-cards article[data-region="us-east-1"]');
  assert.equal(await primaryCard.getAttribute('data-health'), 'throttled');
  // The fast verdict can move DNS before the primary's next one-minute canary datapoint: wait
  // for that datapoint (a failed probe) to reach the card.
  await page.waitForSelector('#region-cards article[data-region="us-east-1"] .dot.bad', { timeout: 30000 });
  assert.equal(await page.locator('#region-cards article[data-region="us-west-2"] .dot.bad').count(), 0, 'the secondary probes fine');
  assert.equal(await page.locator('#region-cards article[data-region="us-west-2"]').getAttribute('data-dns'), 'true');
  assert.equal(await primaryCard.locator('dd[data-row="Fast verdict"]').textContent(), 'fail over');
  for (const kind of ['fault', 'fast_failover', 'endpoint_unhealthy', 'dns_flip']) {
    assert.ok(await page.locator(`#key-events li[data-kind="${kind}"]`).count() > 0, `key event ${kind}`);
  }
  assert.equal(await page.locator('#fault-banner').getAttribute('data-active'), 'true');
  assert.match(await page.locator('#fault-banner').textContent(), /T\+\d+ s AWS since the fault/);
  assert.equal(await page.locator('#users-chart polyline[data-region="us-west-2"]').count(), 1);
  assert.equal(await page.locator('#control-room .dot').evaluateAll((dots) => dots.every((d) => getComputedStyle(d).color !== 'rgb(27, 27, 27)')), true, 'dots are coloured');
  await page.screenshot({ path: path.join(shots, '2c-control-room-during-fault.png'), fullPage: true });
  await page.getByRole('button', { name: 'Heal' }).click();
  await page.waitForFunction(() => document.querySelector('#dns-answer').textContent === 'us-east-1', null, { timeout: 90000 });
  assert.equal((await status()).dns_answer, 'us-east-1');
  // A bid after the failback is still accepted, and the page keeps one consistent high bid.
  await page.fill('#bid-amount', String(dollars + 20));
  await page.keyboard.press('Enter');
  await page.waitForSelector(`#high-bid[data-amount="${(dollars + 20) * 100}"]`);
  await page.screenshot({ path: path.join(shots, '3-failed-back.png') });
  // The fault and the heal are still on screen after the failback.
  for (const kind of ['fault', 'heal', 'fast_serve']) {
    assert.ok(await page.locator(`#key-events li[data-kind="${kind}"]`).count() > 0, `key event ${kind} kept`);
  }
  assert.equal(await page.locator('#fault-banner').getAttribute('data-active'), 'false');
  // Sockets stay on the secondary after DNS failed back: the page says why.
  assert.match(await page.locator('#dns-note').textContent(), /stay there until they end/);
  assert.deepEqual(errors, []);
});

test('the token endpoint refuses a malformed user id with a clear error', async () => {
  const response = await fetch(`${base}/api/token?sub=${encodeURIComponent('<script>')}`);
  assert.equal(response.status, 400);
  assert.match(await response.text(), /sub must be/);
});

test('a lab with simulated users: the room counts them, times the fault, and goes stale when the lab stops', async () => {
  const { child, url } = await startLab(['--users', '6']);
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 1000 } });
    const errors = [];
    page.on('pageerror', (error) => errors.push(String(error)));
    await page.goto(`${url}/?user=carol`);
    await page.waitForFunction(() => document.querySelector('#users').textContent.startsWith('6/6'), null, { timeout: 60000 });
    await page.getByRole('button', { name: 'Throttle' }).click();
    await page.waitForFunction(
      () => /restored elsewhere 6\/6 · RTO so far \d+ s/.test(document.querySelector('#fault-banner').textContent),
      null,
      { timeout: 90000 },
    );
    await page.waitForFunction(() => Number(document.querySelector('#region-cards article[data-region="us-west-2"] dd[data-row="Connections"]').textContent) >= 6);
    await page.screenshot({ path: path.join(shots, '4-population-failed-over.png'), fullPage: true });
    child.kill('SIGTERM');
    await page.waitForSelector('#control-room[data-stale="true"]', { timeout: 10000 });
    assert.match(await page.locator('#lab-link').textContent(), /lab unreachable.*stale/);
    await page.screenshot({ path: path.join(shots, '5-lab-stopped-stale.png'), fullPage: true });
    assert.deepEqual(errors, []);
  } finally {
    child.kill('SIGTERM');
  }
});

test('a planned evacuation moves the page to the secondary without an error', async () => {
  const { child, url } = await startLab();
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 1000 } });
    const errors = [];
    page.on('pageerror', (error) => errors.push(String(error)));
    await page.goto(`${url}/?user=dave&fallback=0`);
    await page.waitForFunction(() => document.querySelector('#region-badge').textContent === 'us-east-1', null, { timeout: 60000 });
    await page.getByRole('button', { name: 'Evacuate primary' }).click();
    await page.waitForFunction(() => document.querySelector('#region-badge').textContent === 'us-west-2', null, { timeout: 60000 });
    await page.waitForFunction(() => document.querySelector('#last-restore').textContent.includes('from us-west-2'));
    await page.waitForFunction(() => /told to move to us-west-2/.test(document.querySelector('#evacuate-result').textContent));
    assert.match(await page.locator('#conn-endpoint').textContent(), /global name/);
    // The room polls the status: the note shows at its next poll.
    await page.waitForFunction(() => [...document.querySelectorAll('#key-events li')].some((li) => li.textContent.includes('taken out of DNS')));
    await page.screenshot({ path: path.join(shots, '6-evacuated.png'), fullPage: true });
    assert.deepEqual(errors, []);
  } finally {
    child.kill('SIGTERM');
  }
});
