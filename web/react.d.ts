// Types for react.js (`wsdr-client/react`). Independent of @types/react: the hook's
// argument and result are plain data.
import type {
  AuctionClientOptions,
  AuctionView,
  BidStatus,
  ConnectionState,
  EndpointDetail,
  You,
} from './wsdr-client.js';

export interface BidState {
  amount: number | null;
  /** `sent` until the server answers. */
  /** `sent` until answered; `expired`: made offline, too old when the connection came back, never sent. */
  status: BidStatus | 'sent' | 'expired';
  reason: string | null;
  region: string | null;
  /** Neither accepted nor rejected for sure yet: show it as pending, not as lost. */
  doubtful: boolean;
  /** The final word on a doubtful bid, once settled. */
  stands?: boolean;
}

export interface WsdrState {
  connection: ConnectionState;
  /** The Region serving this session (every frame names it). */
  region: string | null;
  /** The auction as the serving Region last told it; null until the first state. */
  auction: AuctionView | null;
  you: You | null;
  /** How long the last outage lasted, ms (null before any). */
  outageMs: number | null;
  endpoint: EndpointDetail | null;
  bids: Readonly<Record<string, BidState>>;
  lastDisconnect: string | null;
}

export interface WsdrHook extends WsdrState {
  /** Send a bid (a positive integer of minor units); returns its bidId. */
  bid(amount: number): string;
}

export declare function useWsdr(options: AuctionClientOptions): WsdrHook;

/** The state transition for one client event (what the hook applies). */
export declare function reduce(state: WsdrState, type: string, detail: unknown): WsdrState;
