import { afterEach } from 'vitest';

/**
 * Registers an afterEach that closes every peer a test started (newest first) and returns
 * `track(peer)`, which hands the peer back after noting it. A tracked peer's close() runs once,
 * so a test may close one early (to see the platform go away) without a second close after.
 */
export function trackPeers(): <T extends { close(): Promise<void> }>(peer: T) => T {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (closers.length > 0) await closers.pop()!();
  });
  return (peer) => {
    const close = peer.close.bind(peer);
    let closing: Promise<void> | null = null;
    peer.close = () => (closing ??= close());
    closers.push(() => peer.close());
    return peer;
  };
}
