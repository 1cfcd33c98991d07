// Sockets a test opens, answers and drops by hand, for the client's session tests.
import assert from 'node:assert/strict';

/** Sockets the test opens, answers and drops by hand. */
export function sockets() {
  const all = [];
  class Socket {
    constructor(url, protocols) {
      this.url = url;
      this.protocols = protocols;
      this.sent = [];
      this.closedWith = null;
      all.push(this);
    }
    send(frame) {
      this.sent.push(JSON.parse(frame));
    }
    close(code, reason) {
      this.closedWith = { code, reason };
    }
    open() {
      this.onopen?.({});
    }
    deliver(frame) {
      this.onmessage?.({ data: typeof frame === 'string' ? frame : JSON.stringify(frame) });
    }
    drop(code = 1006) {
      this.onclose?.({ code, reason: '', wasClean: false });
    }
    frames(action) {
      return this.sent.filter((f) => f.action === action);
    }
  }
  return { all, Socket };
}

export const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
export async function until(check, what) {
  for (let i = 0; i < 200; i += 1) {
    if (check()) return;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  assert.fail(`never: ${what}`);
}

