// A React app on the package's React layer (`wsdr-client/react`, here from web/react.js): a
// provider holding one client, and three components sharing it (the live auction with the
// connection's state and the serving Region, a badge with the high bid, and another auction
// watched over the same socket with useAuction, with its own bid button). Bundled by
// esbuild in react.test.js and served on the lab's origin.
import { createElement as h, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useAuction, useWsdr, WsdrProvider } from '../../web/react.js';

const params = new URLSearchParams(window.location.search);
const user = params.get('user') ?? 'react-user';

function Auction() {
  const { connection, region, auction, bids, outageMs, bid } = useWsdr();
  const [amount, setAmount] = useState('');
  const high = auction?.highBid ?? null;
  return h('main', null,
    h('p', { id: 'connection', 'data-state': connection }, connection),
    h('p', { id: 'region', 'data-region': region ?? '' }, region ?? '-'),
    h('p', { id: 'outage' }, outageMs === null ? '' : `restored after ${outageMs} ms`),
    h('p', { id: 'high-bid', 'data-amount': high ? String(high.amount) : '', 'data-bidder': high?.bidder ?? '' },
      high ? `${high.amount} by ${high.bidder}` : 'no bids'),
    h('form', {
      onSubmit: (event) => {
        event.preventDefault();
        bid(Number(amount));
      },
    },
      h('input', { id: 'amount', value: amount, onChange: (event) => setAmount(event.target.value) }),
      h('button', { type: 'submit' }, 'Bid')),
    h('ul', { id: 'bids' }, Object.entries(bids).map(([bidId, b]) =>
      h('li', { key: bidId, 'data-status': b.status, 'data-amount': String(b.amount), 'data-region': b.region ?? '' },
        `${b.amount}: ${b.status}${b.region ? ` by ${b.region}` : ''}`))),
  );
}

/** A second component on the same client: no socket of its own. */
function Badge() {
  const { auction } = useWsdr();
  return h('p', { id: 'badge', 'data-amount': auction?.highBid ? String(auction.highBid.amount) : '' }, 'high bid');
}

/** Another auction over the same socket: its own view and bids, no socket of its own. */
function OtherLot() {
  const { auction, bid, bids } = useAuction('lot-2');
  const high = auction?.highBid ?? null;
  const next = (high?.amount ?? 0) + 1;
  const accepted = Object.values(bids).filter((b) => b.status === 'accepted').map((b) => b.amount);
  return h('section', null,
    h('p', { id: 'other-lot', 'data-id': auction?.id ?? '', 'data-amount': high ? String(high.amount) : '' },
      auction ? `${auction.id}: ${high ? high.amount : 'no bids'}` : 'loading'),
    h('button', { id: 'other-bid', 'data-next': String(next), onClick: () => bid(next) }, 'Bid on lot-2'),
    h('p', { id: 'other-accepted', 'data-amounts': accepted.join(',') }));
}

const config = await (await fetch('/api/config')).json();
createRoot(document.getElementById('root')).render(
  h(WsdrProvider, {
    url: config.front_door,
    regions: config.regions,
    auctionId: config.auction,
    timeScale: config.time_scale,
    tokenProvider: async () => {
      const response = await fetch(`/api/token?sub=${encodeURIComponent(user)}`);
      if (!response.ok) throw new Error(`token: HTTP ${response.status}`);
      return (await response.json()).token;
    },
  }, h(Auction), h(Badge), h(OtherLot)),
);
