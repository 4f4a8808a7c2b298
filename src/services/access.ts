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
 * Who may do admin work. One rule for every edge: a Slack user is an admin when their id is in
 * HERALD_SLACK_ADMINS; nobody else is (an API key's rights are its scopes, checked by
 * ApiKeyService.requireScope). Every admin task requires an admin, checked on every request:
 * hiding a button is presentation, this is the rule.
 */
export class AccessPolicy {
  private readonly admins: ReadonlySet<string>;

  constructor(d: AccessPolicyDeps) {
    this.admins = new Set(d.slackAdmins);
  }

  isAdmin(actor: Pick<Actor, 'type' | 'id'>): boolean {
    return actor.type === 'slack_user' && this.admins.has(actor.id);
  }

  /** Whether `actor` may do `task` (every admin task needs an admin). */
  can(actor: Pick<Actor, 'type' | 'id'>, task: AdminTask): boolean {
    void task;
    return this.isAdmin(actor);
  }

  /** Throws `insufficient_scope` (403) unless `actor` may do `task`. */
  authorize(actor: Pick<Actor, 'type' | 'id'>, task: AdminTask): void {
    if (!this.can(actor, task))
      throw new DomainError('insufficient_scope', 'Only Herald admins can do this.', [], { task });
  }
}
