/**
 * Where a Redis URL points, safe to log: `redis://host:port/db` without user name or password, or
 * the unix socket path. REDIS_URL may carry a password, so it is never printed as given.
 */
export function redisLocation(url: string): string {
  if (url.startsWith('/')) return `unix:${url.split('?')[0]}`;
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return '(unparseable REDIS_URL)';
  }
}
