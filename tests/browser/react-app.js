// A React app on the package's hook (`wsdr-client/react`, here from web/react.js): the live
// auction, the connection's state and the serving Region. Bundled by esbuild in
// react.test.js and served on the lab's origin.
import { createElement as h, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useWsdr } from '../../web/react.js';

const params = new URLSearchParams(window.location.search);
const user = params.get('user') ?? 'react-user';

function Auction({ config }) {
  const { connection, region, auction, bids, outageMs, bid } = useWsdr({
    url: config.front_door,
    regions: config.regions,
    auctionId: config.auction,
    timeScale: config.time_scale,
    tokenProvider: async () => {
      const response = await fetch(`/api/token?sub=${encodeURIComponent(user)}`);
      if (!response.ok) throw new Error(`token: HTTP ${response.status}`);
      return (await response.json()).token;
    },
  });
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

const config = await (await fetch('/api/config')).json();
createRoot(document.getElementById('root')).render(h(Auction, { config }));
