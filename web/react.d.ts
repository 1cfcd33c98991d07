// Types for react.js (`wsdr-client/react`). Independent of @types/react: the hooks' arguments
// and results are plain data, and the provider's children are whatever React accepts.
import type { AuctionClientOptions, BidView, ClientView, ConnectionState, TopicView } from './wsdr-client.js';

/** One bid as the hook shows it (the client's `BidView`). */
export type BidState = BidView;

/** What the hook renders (the client's `ClientView`: `client.state`), `idle` while the hook
 * is not enabled (no client, no socket). */
export type WsdrState = Omit<ClientView, 'connection'> & { connection: ConnectionState | 'idle' };

/** The client's options, plus `enabled` (default true): false keeps the hook idle, e.g.
 * before sign-in. */
export type WsdrOptions = AuctionClientOptions & { enabled?: boolean };

export interface WsdrHook extends WsdrState {
  /** Send a bid (a positive integer of minor units) in `auctionId` (default: the first
   * auction); returns its bidId. Throws while idle. */
  bid(amount: number, auctionId?: string): string;
  /** Watch one more auction over the same socket (kept if the client is made again). */
  watch(auctionId: string): void;
  /** Hold every op of one more topic (a chat room) over the same socket. */
  join(topic: string): void;
  /** Write an op to a topic (joined from then on); returns its op id. Throws while idle. */
  write(topic: string, op: unknown): string;
  /** Connect now: ends the session, or cuts a retry's backoff short. */
  reconnect(): void;
  /** Close the client for good (the component stays mounted; remount to start again). */
  close(): void;
}

/** With options, a client of the component's own; without, the nearest provider's. */
export declare function useWsdr(options?: WsdrOptions): WsdrHook;

/** One client (one socket) shared by every `useWsdr()` below it. */
export declare function WsdrProvider(props: WsdrOptions & { children?: unknown }): unknown;

/** The state transition for one client event (what the hook applies). */
export declare function reduce(state: WsdrState, type: string, detail: unknown): WsdrState;

/** One auction of the nearest provider's shared client: `auction` is its view (null until its
 * first state), `bid(amount)` bids in it; watched over the provider's one socket from mount. */
export declare function useAuction(auctionId: string): WsdrHook;

/** One topic of any app (a chat room) of the nearest provider's shared client, every op held:
 * `topic` is its state (null until its first answer), `write(op)` writes to it; joined over
 * the provider's one socket from mount. */
export declare function useTopic(topic: string): Omit<WsdrHook, 'write'> & {
  topic: TopicView | null;
  write(op: unknown): string;
};
