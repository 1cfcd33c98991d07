// The client and the first state the session tests start from (web/test/session*.test.js).
import { AuctionClient } from '../wsdr-client.js';

/** A Region's `state` for lot-1, as alice sees it. */
export const state = (region, { bids = [], versions = {}, highBid = null, settled } = {}) => ({
  type: 'state',
  region,
  auction: { id: 'lot-1', item: 'lamp', highBid, bidCount: 0, version: 0, versions },
  you: { userId: 'alice', lastBid: null, bids, ...(settled ? { settled } : {}) },
});

export function client(Socket, options = {}) {
  const c = new AuctionClient({
    url: 'wss://global.example',
    auctionId: 'lot-1',
    WebSocket: Socket,
    tokenProvider: () => 'token',
    // Reconnect at once: the tests are about what a session carries, not about waiting.
    backoff: { baseMs: 1, capMs: 1, floorMs: 0, jitter: false, herdWindowMs: 0 },
    ...options,
  });
  const events = [];
  for (const type of ['bidResult', 'bidSettled', 'update', 'restored', 'disconnected', 'bidExpired']) {
    c.addEventListener(type, (e) => events.push([type, e.detail]));
  }
  return { c, events };
}
