// useWsdr and WsdrProvider: the reconnecting auction client as React hooks. React is a peer
// dependency; this module is the package's `wsdr-client/react` entry and is not loaded by the
// lab's page. Server rendering is safe: nothing here touches `window` or opens a socket
// outside an effect, and effects do not run on the server.
import { createContext, createElement, useCallback, useContext, useEffect, useRef, useState } from 'react';
import { AuctionClient, INITIAL_VIEW, reduceView } from './wsdr-client.js';

/** The state transition for one client event (the client's own `reduceView`). */
export const reduce = reduceView;

const EVENTS = [
  'status', 'restored', 'update', 'bidSent', 'bidResult', 'bidSettled', 'bidExpired', 'endpoint', 'disconnected',
  'topicRestored', 'topicUpdated', 'discontinuity', 'writeSent', 'writeResult', 'writeSettled', 'writeExpired',
];

/** What a hook shows while it is not enabled (before sign-in, say): no client, no socket. */
const IDLE_VIEW = Object.freeze({ ...INITIAL_VIEW, connection: 'idle' });

const WsdrContext = createContext(null);

/**
 * One client for `options` while `enabled` (default true) and mounted: a new client when
 * `url`, `auctionId` or `enabled` change; the other options are read when it connects;
 * `tokenProvider` may change freely.
 */
function useWsdrClient(options, enabled) {
  const [state, setState] = useState(enabled ? INITIAL_VIEW : IDLE_VIEW);
  const client = useRef(null);
  const latest = useRef(options);
  latest.current = options;
  // Auctions components asked for with `watch` (useAuction): kept across clients, since a
  // child's effect runs before its provider's creates the client.
  const watched = useRef(new Set());
  // Topics components joined (useTopic), kept across clients likewise.
  const joined = useRef(new Set());
  useEffect(() => {
    if (!enabled) {
      setState(IDLE_VIEW);
      return undefined;
    }
    const { enabled: _enabled, children: _children, ...clientOptions } = latest.current;
    const next = new AuctionClient({
      ...clientOptions,
      auctionIds: [...(clientOptions.auctionIds ?? []), ...watched.current],
      topics: [...(clientOptions.topics ?? []), ...joined.current],
      tokenProvider: (context) => latest.current.tokenProvider(context),
    });
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
  }, [options?.url, options?.auctionId, enabled]);
  // Stryker disable ArrayDeclaration: the callbacks' deps are constant either way ([] or any constant list): each is made once per hook and reads the client through its ref.
  const bid = useCallback((amount, auctionId) => {
    const current = client.current;
    if (!current) throw new Error('not connected: the hook is not enabled, or its component is not mounted');
    // The client emits `bidSent`, which the listeners fold in like every other event.
    return auctionId === undefined ? current.bid(amount) : current.bid(amount, auctionId);
  }, []);
  // Watch one more auction over this client's socket (now, and in every client it makes).
  const watch = useCallback((auctionId) => {
    watched.current.add(auctionId);
    client.current?.watch(auctionId);
  }, []);
  // Hold every op of one more topic (a chat room) over this client's socket.
  const join = useCallback((topic) => {
    joined.current.add(topic);
    client.current?.join(topic);
  }, []);
  // Write an op to a topic (joined from then on); returns its op id.
  const write = useCallback((topic, op) => {
    const current = client.current;
    if (!current) throw new Error('not connected: the hook is not enabled, or its component is not mounted');
    joined.current.add(topic);
    return current.write(topic, op);
  }, []);
  // Connect now (a "reconnect" button; cuts a retry's backoff short) and close for good.
  const reconnect = useCallback(() => client.current?.reconnect(), []);
  const close = useCallback(() => client.current?.close(), []);
  // Stryker restore ArrayDeclaration
  return { ...state, bid, watch, join, write, reconnect, close };
}

/**
 * Shares one client (one socket) among every component under it that calls `useWsdr()`
 * without options. Takes the client's options as props, plus `enabled`.
 */
export function WsdrProvider(props) {
  const value = useWsdrClient(props, props.enabled ?? true);
  return createElement(WsdrContext.Provider, { value }, props.children);
}

/**
 * With options: a client of this component's own (connected while `options.enabled`, default
 * true). Without: the nearest `WsdrProvider`'s shared client. Either way the auction as the
 * serving Region last told it, the connection's state (`idle` while not enabled), the
 * serving Region, the user's bids, `bid(amount)`, `reconnect()` and `close()`.
 */
export function useWsdr(options) {
  const shared = useContext(WsdrContext);
  // Both hooks run on every render (the rules of hooks); the one not asked for stays idle.
  const own = useWsdrClient(options, options !== undefined && (options.enabled ?? true));
  if (options !== undefined) return own;
  if (shared === null) throw new Error('useWsdr() without options needs a <WsdrProvider> above it');
  return shared;
}

/**
 * One auction of the nearest `WsdrProvider`'s shared client: watched over its one socket from
 * this component's mount (several components, several auctions, one socket). Returns the
 * provider's hook with `auction` this auction's view (null until its first state) and
 * `bid(amount)` bidding in it.
 */
export function useAuction(auctionId) {
  const shared = useContext(WsdrContext);
  if (shared === null) throw new Error('useAuction() needs a <WsdrProvider> above it');
  const { watch, bid } = shared;
  useEffect(() => {
    watch(auctionId);
  }, [watch, auctionId]);
  const bidHere = useCallback((amount) => bid(amount, auctionId), [bid, auctionId]);
  return { ...shared, auction: shared.auctions?.[auctionId] ?? null, bid: bidHere };
}

/**
 * One topic of any app (a chat room, `chat:<room>`) of the nearest `WsdrProvider`'s shared
 * client, every op held: joined from this component's mount. Returns the provider's hook with
 * `topic` this topic's state (`{ copies, versions, view, complete, hole }`, null until its
 * first answer: `copies` are every op copy held, to order as the app orders them, and `hole`
 * says copies are missing that the serving Region cannot give now) and `write(op)` writing to
 * it.
 */
export function useTopic(topic) {
  const shared = useContext(WsdrContext);
  if (shared === null) throw new Error('useTopic() needs a <WsdrProvider> above it');
  const { join, write } = shared;
  useEffect(() => {
    join(topic);
  }, [join, topic]);
  const writeHere = useCallback((op) => write(topic, op), [write, topic]);
  // Stryker disable next-line OptionalChaining: the hook's state always has `topics` (its initial and idle views do, and no event removes it).
  return { ...shared, topic: shared.topics?.[topic] ?? null, write: writeHere };
}
