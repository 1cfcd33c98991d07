// What the browser tests share: a `wsdr lab` on a free port, headless Debian chromium, and a
// bounded wait.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { chromium } from 'playwright-core';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const wsdr = process.env.WSDR_BIN ?? path.join(root, 'target/debug/wsdr');

/** Start `wsdr lab` on a free port; resolves to { child, url } once it prints its address. */
export async function startLab(extra = []) {
  const child = spawn(wsdr, ['lab', '--time-scale', '60', '--listen', '127.0.0.1:0', ...extra], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const found = out.match(/control room: (http:\/\/127\.0\.0\.1:\d+)\//);
      if (found) resolve(found[1]);
    });
    child.on('exit', (code) => reject(new Error(`wsdr lab exited with ${code}: ${out}`)));
  });
  return { child, url };
}

export function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
}

/** Poll `check` every 100 ms until it holds, for at most `timeoutMs`. */
export async function until(what, check, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
