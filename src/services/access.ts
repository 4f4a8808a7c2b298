import type { Actor } from '../domain/common/actor.js';
import { DomainError } from '../domain/common/errors.js';

/**
 * Admin work that an edge may offer: seeing connections and API keys (the App Home's admin
 * part), testing connections, and generating or revoking API keys.
 */
export type AdminTask = 'view_admin' | 'test_connections' | 'manage_api_keys';

export interface AccessPolicyDeps {
  /** HERALD_SLACK_ADMINS: the Slack user ids that are Herald admins. */
  slackAdmins: readonly string[];
}

/**
 * Who may do admin work. One rule for every edge, applied by the services that do the work
 * (ConnectionService.test, ApiKeyService.create/revoke, AdminViewService.overview) on every call:
 * hiding a button is presentation, this is the rule.
 *
 * - A Slack user may when their id is in HERALD_SLACK_ADMINS (isAdmin).
 * - The system actor is the operator's own CLI, on the host with Herald's configuration: it may.
 * - An API key is no admin; its rights are its scopes, checked by the HTTP edge before any service
 *   is reached (ApiKeyService.requireScope). The one admin task /v1 offers is testing a connection
 *   (scope connections:write); no API key can see or manage API keys.
 */
export class AccessPolicy {
  private readonly admins: ReadonlySet<string>;

  constructor(d: AccessPolicyDeps) {
    this.admins = new Set(d.slackAdmins);
  }

  isAdmin(actor: Pick<Actor, 'type' | 'id'>): boolean {
    return actor.type === 'slack_user' && this.admins.has(actor.id);
  }

  /** Whether `actor` may do `task` (see the class comment). */
  can(actor: Pick<Actor, 'type' | 'id'>, task: AdminTask): boolean {
    switch (actor.type) {
      case 'slack_user':
        return this.isAdmin(actor);
      case 'system':
        return true;
      case 'api_key':
        return task === 'test_connections';
    }
  }

  /** Throws `insufficient_scope` (403) unless `actor` may do `task`. */
  authorize(actor: Pick<Actor, 'type' | 'id'>, task: AdminTask): void {
    if (!this.can(actor, task))
      throw new DomainError('insufficient_scope', 'Only Herald admins can do this.', [], { task });
  }
}
