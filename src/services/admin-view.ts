import type { Actor } from '../domain/common/actor.js';
import type { ApiKey } from '../domain/common/api-key.js';
import type { ConnectionRecord } from '../domain/connection/connection.js';
import type { AccessPolicy } from './access.js';
import type { ApiKeyService } from './api-keys.js';
import type { ConnectionService } from './connections.js';

/** The admin part of a person's view: the newest connections and API keys, and whether there are more. */
export interface AdminOverview {
  connections: ConnectionRecord[];
  moreConnections: boolean;
  keys: ApiKey[];
  moreKeys: boolean;
}

export interface AdminViewDeps {
  access: AccessPolicy;
  connections: Pick<ConnectionService, 'list'>;
  apiKeys: Pick<ApiKeyService, 'list'>;
}

/**
 * What an admin sees of Herald's setup (the Slack App Home's admin part): the connections and the
 * API keys. Refused (insufficient_scope) unless AccessPolicy lets the actor view admin data.
 */
export class AdminViewService {
  constructor(private readonly d: AdminViewDeps) {}

  async overview(
    actor: Pick<Actor, 'type' | 'id'>,
    caps: { connections: number; keys: number },
  ): Promise<AdminOverview> {
    this.d.access.authorize(actor, 'view_admin');
    const [connections, keys] = await Promise.all([
      this.d.connections.list({}, { limit: caps.connections + 1, cursor: null }),
      this.d.apiKeys.list({ limit: caps.keys + 1, cursor: null }),
    ]);
    return {
      connections: connections.data.slice(0, caps.connections),
      moreConnections: connections.data.length > caps.connections,
      keys: keys.data.slice(0, caps.keys),
      moreKeys: keys.data.length > caps.keys,
    };
  }
}
