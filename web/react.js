// useWsdr: the reconnecting auction client as a React hook. React is a peer dependency; this
// module is the package's `wsdr-client/react` entry and is not loaded by the lab's page.
import { useCallback, useEffect, useRef, useState } from 'react';
import { AuctionClient, INITIAL_VIEW, reduceView } from './wsdr-client.js';

/** The state transition for one client event (the client's own `reduceView`). */
export const reduce = reduceView;

const EVENTS = ['status', 'restored', 'update', 'bidSent', 'bidResult', 'bidSettled', 'bidExpired', 'endpoint', 'disconnected'];

/**
 * Connects while the component is mounted (a new client when `url` or `auctionId` change;
 * the other options are read when it connects; `tokenProvider` may change freely) and
 * returns the auction as the serving Region last told it, the connection's state, the
 * serving Region, the user's bids and `bid(amount)`.
 */
export function useWsdr(options) {
  const [state, setState] = useState(INITIAL_VIEW);
  const client = useRef(null);
  const latest = useRef(options);
  latest.current = options;
  useEffect(() => {
    const next = new AuctionClient({ ...latest.current, tokenProvider: (context) => latest.current.tokenProvider(context) });
    client.current = next;
    setState(next.state);
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
    // The client emits `bidSent`, which the listeners fold in like every other event.
    return current.bid(amount);
  }, []);
  // Connect now (a "reconnect" button; cuts a retry's backoff short) and close for good.
  const reconnect = useCallback(() => client.current?.reconnect(), []);
  const close = useCallback(() => client.current?.close(), []);
  return { ...state, bid, reconnect, close };
}
