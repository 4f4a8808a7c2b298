/*
 * Kept in the domain layer (it imports nothing) so that both edges, HTTP and Slack, can judge an
 * error without reaching into the store.
 */

/**
 * Whether an error means "Redis cannot be used right now" rather than a bug: ioredis' time-outs,
 * closed or unwritable connections, exhausted retries, socket errors, and the replies of a Redis
 * that is loading, read-only (a demoted primary) or whose cluster is down. The HTTP and Slack
 * edges answer these as 503 service_unavailable.
 */
export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'MaxRetriesPerRequestError') return true;
  const code = (err as { code?: unknown }).code;
  if (
    typeof code === 'string' &&
    /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN|ENOENT)$/.test(code)
  )
    return true;
  const m = err.message;
  return (
    m === 'Command timed out' ||
    m === 'Connection is closed.' ||
    m.startsWith("Stream isn't writeable") ||
    m.startsWith('Reached the max retries per request limit') ||
    m.startsWith('connect ETIMEDOUT') ||
    /^(LOADING|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|BUSY) /.test(m) ||
    m.startsWith('Failed to refresh slots cache') ||
    m.startsWith('None of startup nodes is available')
  );
}
