// The live auction page, the chat room beside it (`chat:lobby`, the kit's second app over the
// same socket) and the lab's control room. Talks to the lab's control API (/api/config,
// /api/token, /api/status, /api/fault) and to both apps over WebSocket with the wsdr client
// module.
import { AuctionClient, conversation, minimumNextBid } from './wsdr-client.js';

const $ = (id) => document.getElementById(id);
const money = (minor) => `$${(minor / 100).toLocaleString('en-US', { minimumFractionDigits: 2 })}`;
const params = new URLSearchParams(window.location.search);
const user = params.get('user') || `browser-${Math.random().toString(16).slice(2, 8)}`;
// A lab started with --allow-remote prints this page's URL with its control token.
const controlToken = params.get('token');

function api(path, init = {}) {
  const headers = new Headers(init.headers);
  if (controlToken) headers.set('authorization', `Bearer ${controlToken}`);
  return fetch(path, { ...init, headers });
}

// Elements from DOM nodes and text, never from HTML strings.
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  node.append(...children);
  return node;
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

const REGION_COLOURS = ['#1f5fbf', '#b3541e'];
const awsClock = (seconds) => {
  const s = Math.max(0, Math.round(seconds));
  return `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
};

function setText(id, text) {
  const el = $(id);
  if (el.textContent !== text) el.textContent = text;
}

// The auction's rules from its last `state` (startingPrice, minIncrement): the bid form shows
// the minimum next bid against whatever high bid is on screen.
let rules = {};

function showAuction(auction, region) {
  rules = { startingPrice: auction.startingPrice, minIncrement: auction.minIncrement };
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
  const minimum = minimumNextBid({ ...rules, highBid: high });
  $('bid-amount').placeholder = minimum == null ? '' : `at least ${money(minimum)}`;
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
  const config = await (await api('/api/config')).json();
  const client = new AuctionClient({
    url: config.front_door,
    regions: params.get('fallback') === '0' ? [] : config.regions,
    auctionId: config.auction,
    topics: [LOBBY],
    timeScale: config.time_scale,
    tokenProvider: async () => {
      const response = await api(`/api/token?sub=${encodeURIComponent(user)}`);
      if (!response.ok) throw new Error(`token: HTTP ${response.status}`);
      return (await response.json()).token;
    },
  });

  client.addEventListener('status', ({ detail }) => {
    setText('conn-state', detail.state);
    setText('conn-attempt', String(detail.attempt ?? 0));
    setText('conn-delay', detail.delayMs === undefined ? '–' : detail.delayMs === null ? 'waiting for the network' : `${(detail.delayMs / 1000).toFixed(2)} s (lab)`);
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
  showRoom(client);
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
      try {
        const response = await api('/api/fault', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ kind: button.dataset.fault, region: 0 }),
        });
        setText('fault-result', response.ok ? `${button.dataset.fault}: done` : `refused: ${await response.text()}`);
      } catch {
        setText('fault-result', `${button.dataset.fault}: the lab did not answer`);
      }
      refresh();
    });
  }

  $('evacuate').addEventListener('click', async () => {
    setText('evacuate-result', 'taking the primary out of DNS, then moving its users…');
    try {
      const response = await api('/api/evacuate', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ region: 0, planned: true }),
      });
      const text = await response.text();
      let answer = null;
      try { answer = JSON.parse(text); } catch { /* a plain-text refusal */ }
      if (!response.ok && !answer?.report) throw new Error(text);
      const { report, to } = answer;
      const untold = report.untold ?? report.posts.failed;
      setText('evacuate-result', answer.complete === false
        ? `INCOMPLETE: ${untold} of ${report.connections} connections never told to move to ${to} (${report.posts.gone} gone)`
        : `${report.connections} connections told to move to ${to} (${report.posts.gone} gone, ${untold} never told)`);
    } catch (error) {
      setText('evacuate-result', `evacuation failed: ${error.message ?? error}`);
    }
  });
  $('restore-service').addEventListener('click', async () => {
    const response = await api('/api/service', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ region: 0, in_service: true }),
    }).catch(() => null);
    setText('evacuate-result', response?.ok ? 'primary back in DNS' : 'the lab did not take it');
  });
  client.addEventListener('moveScheduled', ({ detail }) => {
    setText('conn-state', `moving to ${detail.to} in ${(detail.afterMs / 1000).toFixed(1)} s (lab): ${detail.reason}`);
  });

  const room = new ControlRoom();
  async function refresh() {
    try {
      const response = await api('/api/status', { signal: AbortSignal.timeout(2000) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      room.show(await response.json());
    } catch (error) {
      room.stale(error);
    }
  }
  refresh();
  setInterval(refresh, 500);
}

// The chat room: every copy the client holds of the lobby, shown in the room's one order
// (the same in every browser once they hold the same copies), and a post box.
const LOBBY = 'chat:lobby';

function showRoom(client) {
  const render = () => {
    const held = client.state.topics?.[LOBBY];
    const messages = conversation(held?.copies ?? []);
    const list = $('room-messages');
    list.replaceChildren(
      ...messages.slice(-50).map((m) => el('li', { 'data-op-id': m.opId }, `${m.author}: ${m.text}`, el('span', { class: 'via' }, ` (${m.region})`))),
    );
    setText('room-hole', held?.hole ? 'some messages may be missing: a Region has not sent them (yet)' : '');
  };
  for (const type of ['topicRestored', 'topicUpdated', 'discontinuity']) client.addEventListener(type, render);
  client.addEventListener('writeResult', ({ detail }) => {
    const pending = detail.doubtful ? ' (checking whether it stands...)' : '';
    $('room-result').dataset.status = detail.status;
    setText('room-result', `message ${detail.status}${detail.reason ? ` (${detail.reason})` : ''} by ${detail.region}${pending}`);
  });
  client.addEventListener('writeSettled', ({ detail }) => {
    $('room-result').dataset.status = detail.stands ? 'stands' : 'does-not-stand';
    setText('room-result', detail.stands ? 'your message stands' : 'your message does not stand');
  });
  $('room-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const text = $('room-text').value.trim();
    if (!text) return;
    try {
      client.write(LOBBY, { text });
      $('room-text').value = '';
      $('room-result').dataset.status = 'sent';
      setText('room-result', 'message sent…');
    } catch (error) {
      setText('room-result', `not sent: ${error.message ?? error}`);
    }
  });
}

// The control room: what an SRE reads in five seconds. Every figure comes from /api/status;
// when the lab stops answering, everything on screen is marked stale rather than left to
// look current.
class ControlRoom {
  constructor() {
    this.samples = []; // { aws: seconds, sockets: [..] }
    this.keyEvents = new Map();
    this.lastOk = null;
  }

  show(status) {
    this.lastOk = Date.now();
    $('control-room').dataset.stale = 'false';
    setText('lab-link', 'live');
    const scale = status.time_scale;
    const now = status.lab_seconds * scale;
    setText('lab-clock', `T+${awsClock(now)} (lab ${status.lab_seconds.toFixed(1)} s x ${scale})`);
    setText('dns-answer', status.dns_answer ?? 'no answer yet');
    setText('alarm-state', status.alarm);
    setText('users', status.users ? `${status.users.online}/${status.users.total} online` : 'none (wsdr lab --users N)');
    this.showFault(status);
    this.showDnsNote(status);
    this.showRegions(status);
    this.samples.push({ aws: now, sockets: status.regions.map((r) => r.sockets) });
    while (this.samples.length > 600) this.samples.shift();
    this.showChart(status);
    this.showKeyEvents(status);
  }

  stale(error) {
    $('control-room').dataset.stale = 'true';
    const since = this.lastOk ? ` since ${new Date(this.lastOk).toLocaleTimeString()}` : '';
    setText('lab-link', `lab unreachable${since} (${error.message ?? error}): the figures below are stale`);
  }

  showFault(status) {
    const banner = $('fault-banner');
    const fault = status.fault;
    banner.dataset.active = fault ? 'true' : 'false';
    if (!fault) {
      setText('fault-banner', 'No fault in force');
      return;
    }
    const parts = [`Fault: ${fault.detail}`, `T+${Math.round(fault.since_aws_s)} s AWS since the fault`];
    if (fault.restored !== null && fault.restored !== undefined && status.users) {
      parts.push(`restored elsewhere ${fault.restored}/${status.users.total}`);
    }
    if (fault.rto_so_far_aws_s !== null && fault.rto_so_far_aws_s !== undefined) {
      parts.push(`RTO so far ${Math.round(fault.rto_so_far_aws_s)} s`);
    }
    setText('fault-banner', parts.join(' · '));
  }

  showDnsNote(status) {
    const answered = status.regions.find((r) => r.name === status.dns_answer);
    const elsewhere = status.regions.filter((r) => r.name !== status.dns_answer && r.sockets > 0);
    const note = answered && elsewhere.length
      ? `DNS answers ${answered.name}; ${elsewhere.map((r) => `${r.sockets} connections on ${r.name}`).join(', ')} stay there until they end: open WebSockets do not follow DNS, clients move when they reconnect.`
      : '';
    setText('dns-note', note);
  }

  showRegions(status) {
    const cards = status.regions.map((region, i) => {
      const health = region.down ? 'down' : region.throttled ? 'throttled' : 'serving';
      const dots = el('span', { class: 'dots', 'aria-label': `${region.name} canary, oldest first` },
        ...region.canary.map((ok) => el('span', { class: `dot ${ok ? 'ok' : 'bad'}`, title: ok ? 'pong' : 'failed' }, ok ? '●' : '✕')));
      const link = status.replication[i];
      const replication = link.cut
        ? 'cut'
        : `${(link.lag_ms * status.time_scale / 1000).toFixed(1)} s lag, ${link.in_flight.items} waiting`;
      const rows = [
        ['Role', i === 0 ? 'primary' : 'secondary'],
        ['API', health],
        ['Canary', dots],
        ['Verdict alarm', region.alarm],
        // The fast verdict on this Region, as the judge (the secondary) serves it.
        ...(region.fast_verdict === undefined || region.fast_verdict === null
          ? []
          : [['Fast verdict', region.fast_verdict ? 'serve' : 'fail over']]),
        [status.health_check === 'endpoint' ? 'Health check (fast verdict)' : 'Health check (alarm)',
          region.health_check_healthy ? 'healthy' : 'unhealthy'],
        ['Connections', String(region.sockets)],
        ['Bids accepted', String(region.bids_accepted)],
        [`Replication to ${link.to}`, replication],
      ];
      // Strong mode: whether this Region's replica reaches the MRSC table's quorum.
      const member = status.table_members?.[i];
      if (member) rows.push(['Table quorum', member.quorum ? 'yes' : 'no (bids redirected)']);
      return el('article', {
        class: 'card',
        'data-region': region.name,
        'data-health': health,
        'data-dns': String(status.dns_answer === region.name),
        style: `border-top-color: ${REGION_COLOURS[i] ?? '#888'}`,
      },
      el('h3', {}, region.name, status.dns_answer === region.name ? el('span', { class: 'tag' }, 'DNS') : ''),
      el('dl', { class: 'numbers' }, ...rows.flatMap(([name, value]) => [el('dt', {}, name), el('dd', { 'data-row': name }, value)])));
    });
    $('region-cards').replaceChildren(...cards);
  }

  showChart(status) {
    const chart = $('users-chart');
    const [w, h, left, bottom] = [420, 140, 34, 18];
    const samples = this.samples;
    const nodes = [];
    const first = samples[0]?.aws ?? 0;
    const last = samples.at(-1)?.aws ?? 1;
    const span = Math.max(last - first, 1);
    const top = Math.max(1, ...samples.flatMap((s) => s.sockets));
    const x = (aws) => left + ((aws - first) / span) * (w - left - 4);
    const y = (n) => h - bottom - (n / top) * (h - bottom - 24);
    nodes.push(svg('line', { x1: left, y1: h - bottom, x2: w - 4, y2: h - bottom, class: 'axis' }));
    nodes.push(svg('text', { x: 2, y: y(top) + 4, class: 'label' }, String(top)));
    nodes.push(svg('text', { x: 2, y: h - bottom, class: 'label' }, '0'));
    nodes.push(svg('text', { x: left, y: h - 3, class: 'label' }, `T+${awsClock(first)}`));
    nodes.push(svg('text', { x: w - 4, y: h - 3, class: 'label', 'text-anchor': 'end' }, `T+${awsClock(last)} AWS`));
    if (status.fault) {
      const from = last - status.fault.since_aws_s;
      if (from >= first) {
        nodes.push(svg('rect', { x: x(from), y: 4, width: Math.max(1, x(last) - x(from)), height: h - bottom - 4, class: 'fault-window' }));
      }
    }
    status.regions.forEach((region, i) => {
      // A step chart: connections hold their value until the next sample.
      const points = samples.flatMap((s, k) => {
        const n = s.sockets[i] ?? 0;
        const next = samples[k + 1];
        return next ? [`${x(s.aws)},${y(n)}`, `${x(next.aws)},${y(n)}`] : [`${x(s.aws)},${y(n)}`];
      });
      nodes.push(svg('polyline', { points: points.join(' '), fill: 'none', stroke: REGION_COLOURS[i] ?? '#888', 'stroke-width': 2, 'data-region': region.name }));
      nodes.push(svg('text', { x: left + 6 + i * 110, y: 14, fill: REGION_COLOURS[i] ?? '#888', class: 'label' }, `${region.name}: ${region.sockets}`));
    });
    chart.replaceChildren(...nodes);
  }

  showKeyEvents(status) {
    const list = $('key-events');
    for (const event of status.key_events) {
      const key = `${event.at_ms}|${event.kind}|${event.detail}`;
      if (this.keyEvents.has(key)) continue;
      const aws = (event.at_ms / 1000) * status.time_scale;
      const item = el('li', { 'data-kind': event.kind },
        el('time', {}, `T+${awsClock(aws)}`), ' ',
        el('span', { class: 'kind' }, event.kind), ' ',
        event.detail);
      this.keyEvents.set(key, item);
      list.append(item);
      list.scrollTop = list.scrollHeight;
    }
  }
}

main();
