// Types for react.js (`wsdr-client/react`). Independent of @types/react: the hook's
// argument and result are plain data.
import type { AuctionClientOptions, BidView, ClientView } from './wsdr-client.js';

/** One bid as the hook shows it (the client's `BidView`). */
export type BidState = BidView;

/** What the hook renders (the client's `ClientView`: `client.state`). */
export type WsdrState = ClientView;

export interface WsdrHook extends WsdrState {
  /** Send a bid (a positive integer of minor units); returns its bidId. */
  bid(amount: number): string;
  /** Connect now: ends the session, or cuts a retry's backoff short. */
  reconnect(): void;
  /** Close the client for good (the component stays mounted; remount to start again). */
  close(): void;
}

export declare function useWsdr(options: AuctionClientOptions): WsdrHook;

/** The state transition for one client event (what the hook applies). */
export declare function reduce(state: WsdrState, type: string, detail: unknown): WsdrState;
