import { describe, expect, it } from 'vitest';
import { AccessPolicy, type AdminTask } from '../../src/services/access.js';
import { refusalOf } from './fakes.js';

/** AccessPolicy: who may do admin work (HERALD_SLACK_ADMINS), the rule both edges share. */

const TASKS: AdminTask[] = ['view_admin', 'test_connections', 'manage_api_keys'];

describe('AccessPolicy', () => {
  const policy = new AccessPolicy({ slackAdmins: ['UADMIN'] });

  it('lets a Slack user listed in HERALD_SLACK_ADMINS do every admin task', () => {
    for (const task of TASKS) {
      expect(policy.can({ type: 'slack_user', id: 'UADMIN' }, task)).toBe(true);
      expect(() => policy.authorize({ type: 'slack_user', id: 'UADMIN' }, task)).not.toThrow();
    }
  });

  it('refuses every other Slack user with insufficient_scope, naming the task', () => {
    for (const task of TASKS) {
      expect(policy.can({ type: 'slack_user', id: 'UALICE' }, task)).toBe(false);
      const e = refusalOf(() => policy.authorize({ type: 'slack_user', id: 'UALICE' }, task));
      expect(e.code).toBe('insufficient_scope');
      expect(e.message).toBe('Only Herald admins can do this.');
      expect(e.meta).toEqual({ task });
    }
  });

  it('grants nothing by id alone to API keys or the system actor (their rights are scopes)', () => {
    expect(policy.isAdmin({ type: 'api_key', id: 'UADMIN' })).toBe(false);
    expect(policy.isAdmin({ type: 'system', id: 'UADMIN' })).toBe(false);
  });

  it('has no admins when none are configured (a worker process)', () => {
    expect(new AccessPolicy({ slackAdmins: [] }).isAdmin({ type: 'slack_user', id: 'UADMIN' })).toBe(false);
  });
});
