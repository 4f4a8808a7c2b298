import type { IdempotencyStore } from '../ports/index.js';

/**
 * Slack may deliver the same interaction twice (a retry after a slow ack, a double-clicked
 * submit), and both carry the same view id or trigger id. `once` runs the work for the first and
 * reports the others as repeats, across every Herald instance (the claim is in Redis, shared with
 * the /v1 Idempotency-Key store under its own scope). A failed first run frees the claim, so a
 * user can correct a refused form and submit it again.
 */
const SCOPE = 'slack';

export type Once<T> = { repeat: false; value: T } | { repeat: true };

export async function once<T>(store: IdempotencyStore, key: string | null, work: () => Promise<T>): Promise<Once<T>> {
  // No identity to deduplicate on (a hand-made payload): just run it.
  if (key === null) return { repeat: false, value: await work() };
  const claim = await store.begin(SCOPE, key, key);
  if (claim.state !== 'new') return { repeat: true };
  let value: T;
  // The claim is a short lease (a crashed process frees it within seconds): keep it while working.
  const renewing = setInterval(() => {
    store.renew(claim.claim).catch(() => false);
  }, 1_500);
  renewing.unref();
  try {
    value = await work();
  } catch (e) {
    clearInterval(renewing);
    await store.release(claim.claim).catch(() => undefined);
    throw e;
  }
  clearInterval(renewing);
  await store.complete(claim.claim, { status: 200, body: '', headers: {} });
  return { repeat: false, value };
}

/** The claim key of a modal submission or a trigger, or null when the payload lacks the id. */
export function identity(kind: 'view' | 'trigger', id: string | undefined | null): string | null {
  return typeof id === 'string' && id !== '' ? `${kind}:${id}` : null;
}
