// The live auction page and the lab's control room. Talks to the lab's control API
// (/api/config, /api/token, /api/status, /api/fault) and to the auction over WebSocket with
// the wsdr client module.
import { AuctionClient } from './wsdr-client.js';

const $ = (id) => document.getElementById(id);
const money = (minor) => `$${(minor / 100).toLocaleString('en-US', { minimumFractionDigits: 2 })}`;
const params = new URLSearchParams(window.location.search);
const user = params.get('user') || `browser-${Math.random().toString(16).slice(2, 8)}`;

function setText(id, text) {
  const el = $(id);
  if (el.textContent !== text) el.textContent = text;
}

function showAuction(auction, region) {
  setText('auction-id', auction.id);
  setText('item', auction.item);
  const high = auction.highBid ?? null;
  showHigh(high, auction.bidCount, region);
}

function showHigh(high, bidCount, region) {
  $('high-bid').dataset.amount = high ? String(high.amount) : '';
  setText('high-bid', high ? money(high.amount) : '–');
  setText('high-bidder', high ? high.bidder : '–');
  setText('bid-count', String(bidCount));
  if (high) addHistory(`${money(high.amount)} by ${high.bidder} (via ${region})`, high.bidId);
}

const seenBids = new Set();
function addHistory(text, key) {
  if (seenBids.has(key)) return;
  seenBids.add(key);
  const li = document.createElement('li');
  li.textContent = text;
  $('history').prepend(li);
  while ($('history').children.length > 50) $('history').lastChild.remove();
}

async function main() {
  const config = await (await fetch('/api/config')).json();
  const client = new AuctionClient({
    url: config.front_door,
    regions: params.get('fallback') === '0' ? [] : config.regions,
    auctionId: config.auction,
    timeScale: config.time_scale,
    tokenProvider: async () => {
      const response = await fetch(`/api/token?sub=${encodeURIComponent(user)}`);
      if (!response.ok) throw new Error(`token: HTTP ${response.status}`);
      return (await response.json()).token;
    },
  });

  client.addEventListener('status', ({ detail }) => {
    setText('conn-state', detail.state);
    setText('conn-attempt', String(detail.attempt ?? 0));
    setText('conn-delay', detail.delayMs === undefined ? '–' : `${(detail.delayMs / 1000).toFixed(2)} s (lab)`);
    if (detail.state === 'connected') {
      $('region-badge').dataset.region = detail.region;
      setText('region-badge', detail.region);
    } else if (detail.state !== 'connecting') {
      $('region-badge').dataset.region = '';
      setText('region-badge', detail.state);
    }
  });
  client.addEventListener('restored', ({ detail }) => {
    $('region-badge').dataset.region = detail.region;
    setText('region-badge', detail.region);
    showAuction(detail.auction, detail.region);
    const took = detail.outageMs === null ? 'first connect' : `after ${(detail.outageMs / 1000).toFixed(1)} s (lab)`;
    setText('last-restore', `state restored from ${detail.region}, ${took}`);
  });
  client.addEventListener('update', ({ detail }) => showHigh(detail.highBid, detail.bidCount, detail.region));
  client.addEventListener('bidResult', ({ detail }) => {
    const el = $('bid-result');
    el.className = detail.doubtful ? 'pending' : detail.status === 'rejected' ? 'bad' : 'ok';
    el.dataset.status = detail.status;
    // A replay rejected where the first copy may stand, or an unknown outcome: not final yet.
    const pending = detail.doubtful ? ' (checking whether it stands...)' : '';
    el.textContent = `bid ${detail.status}${detail.reason ? ` (${detail.reason})` : ''} by ${detail.region}${pending}`;
    const current = Number($('high-bid').dataset.amount || '0');
    if (detail.status === 'accepted' && detail.amount > current) {
      showHigh({ amount: detail.amount, bidder: user, bidId: detail.bidId }, Number($('bid-count').textContent) + 1, detail.region);
    }
  });
  client.addEventListener('bidSettled', ({ detail }) => {
    const el = $('bid-result');
    el.className = detail.stands ? 'ok' : 'bad';
    el.dataset.status = detail.stands ? 'stands' : 'does-not-stand';
    el.textContent = detail.stands
      ? `your bid stands (recorded, seen in ${detail.region})`
      : 'your bid does not stand';
  });
  client.addEventListener('endpoint', ({ detail }) => {
    setText('conn-endpoint', detail.regional ? `${detail.url} (regional fallback)` : 'global name');
  });
  client.start();

  $('bid-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const dollars = Number($('bid-amount').value);
    if (!Number.isInteger(dollars) || dollars <= 0) {
      $('bid-result').className = 'bad';
      $('bid-result').textContent = 'enter a whole number of dollars';
      return;
    }
    $('bid-result').className = '';
    $('bid-result').dataset.status = 'sent';
    $('bid-result').textContent = 'bid sent…';
    client.bid(dollars * 100);
  });

  for (const button of document.querySelectorAll('[data-fault]')) {
    button.addEventListener('click', async () => {
      const response = await fetch('/api/fault', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ kind: button.dataset.fault, region: 0 }),
      });
      setText('fault-result', response.ok ? `${button.dataset.fault}: done` : `failed: ${await response.text()}`);
      refresh();
    });
  }

  async function refresh() {
    try {
      const status = await (await fetch('/api/status')).json();
      setText('dns-answer', status.dns_answer ?? 'no answer yet');
      setText('alarm-state', status.alarm);
      setText('canary', status.canary.map((ok) => (ok ? '●' : '○')).join(' ') || '–');
      setText('lab-clock', `${status.lab_seconds.toFixed(1)} s lab = ${(status.lab_seconds * status.time_scale / 60).toFixed(1)} min AWS`);
      const rows = status.regions.map((r, i) => {
        const health = r.down ? 'down' : r.throttled ? 'throttled' : 'healthy';
        const link = status.replication[i];
        const rep = link.cut ? 'cut' : `${link.lag_ms.toFixed(0)} ms lag, ${link.in_flight.items} in flight`;
        return `<tr data-region="${r.name}"><td>${r.name}</td><td>${health}</td><td>${r.sockets}</td><td>${rep}</td></tr>`;
      });
      const body = $('regions').tBodies[0];
      const html = rows.join('');
      if (body.innerHTML !== html) body.innerHTML = html;
      const timeline = $('timeline');
      const items = status.events.map((e) => `<li>${(e.at_ms / 1000).toFixed(1)} s: ${e.kind.replaceAll('_', ' ')}: ${e.detail.replace(/[<>&]/g, '')}</li>`).join('');
      if (timeline.innerHTML !== items) timeline.innerHTML = items;
    } catch {
      setText('dns-answer', 'lab unreachable');
    }
  }
  refresh();
  setInterval(refresh, 500);
}

main();
