// useWsdr: the reconnecting auction client as a React hook. React is a peer dependency; this
// module is the package's `wsdr-client/react` entry and is not loaded by the lab's page.
import { useCallback, useEffect, useRef, useState } from 'react';
import { AuctionClient } from './wsdr-client.js';

const INITIAL = Object.freeze({
  connection: 'connecting',
  region: null,
  auction: null,
  you: null,
  outageMs: null,
  endpoint: null,
  bids: Object.freeze({}),
  lastDisconnect: null,
});

/** The view a component renders, from the client's events (pure: tested without React). */
export function reduce(state, type, detail) {
  switch (type) {
    case 'status':
      return {
        ...state,
        connection: detail.state,
        region: detail.state === 'connected' ? (detail.region ?? state.region) : state.region,
        // `failed` is terminal: its reason stays readable (sign in again, then remount).
        lastDisconnect: detail.state === 'failed' ? detail.reason : state.lastDisconnect,
      };
    case 'restored':
      // A state frame replaces the view: after a failover it is the new Region's truth.
      return { ...state, connection: 'connected', region: detail.region, auction: detail.auction, you: detail.you, outageMs: detail.outageMs };
    case 'update':
      if (!state.auction || detail.auctionId !== state.auction.id) return state;
      return {
        ...state,
        auction: { ...state.auction, highBid: detail.highBid, bidCount: detail.bidCount, version: detail.version, versions: detail.versions },
      };
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
    case 'endpoint':
      return { ...state, endpoint: detail };
    case 'disconnected':
      return { ...state, lastDisconnect: detail.reason };
    default:
      return state;
  }
}

const EVENTS = ['status', 'restored', 'update', 'bidResult', 'bidSettled', 'bidExpired', 'endpoint', 'disconnected'];

/**
 * Connects while the component is mounted (a new client when `url` or `auctionId` change;
 * the other options are read when it connects; `tokenProvider` may change freely) and
 * returns the auction as the serving Region last told it, the connection's state, the
 * serving Region, the user's bids and `bid(amount)`.
 */
export function useWsdr(options) {
  const [state, setState] = useState(INITIAL);
  const client = useRef(null);
  const latest = useRef(options);
  latest.current = options;
  useEffect(() => {
    const next = new AuctionClient({ ...latest.current, tokenProvider: (context) => latest.current.tokenProvider(context) });
    client.current = next;
    setState(INITIAL);
    for (const type of EVENTS) {
      next.addEventListener(type, (event) => setState((current) => reduce(current, type, event.detail)));
    }
    next.start();
    return () => {
      next.close();
      if (client.current === next) client.current = null;
    };
  }, [options.url, options.auctionId]);
  const bid = useCallback((amount) => {
    const current = client.current;
    if (!current) throw new Error('not connected: the component is not mounted');
    const bidId = current.bid(amount);
    setState((s) => ({ ...s, bids: { ...s.bids, [bidId]: { amount, status: 'sent', reason: null, region: null, doubtful: false } } }));
    return bidId;
  }, []);
  return { ...state, bid };
}
