// A Node.js service adopting the package with no DOM in its TypeScript world: the `ws`
// package's own WebSocket class as the socket, under `tsc --strict` with `lib: ["ES2022"]`
// and Node's types only (tsconfig.node.json). The declarations must not need the DOM lib.
import WebSocket from 'ws';
import { AuctionClient, TokenDenied, type AuctionClientOptions } from 'wsdr-client';

const options: AuctionClientOptions = {
  url: 'wss://auction.example.com',
  auctionId: 'lot-1',
  tokenProvider: async ({ refresh }) => {
    if (refresh) throw new TokenDenied('the service account was revoked');
    return 'token';
  },
  WebSocket,
  tokenPlacement: 'subprotocol',
};
const client = new AuctionClient(options);
client.addEventListener('update', (e) => {
  const amount: number | undefined = e.detail.highBid?.amount;
  void amount;
});
client.addEventListener('gaveUp', (e) => void e.detail.reason.length);
void client;
