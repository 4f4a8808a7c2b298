import type { Change } from './commit.js';
import type { Keys } from './keys.js';

/**
 * Every write that changes what the public status page shows bumps the status version in the
 * same atomic Change. The page's cache (src/status/) rebuilds its snapshot when the version moves,
 * and serves requests without touching Redis while it does not.
 */
export function bumpStatusVersion(change: Change, keys: Keys): void {
  change.write('HINCRBY', keys.statusVersion(), 'v', 1);
}
