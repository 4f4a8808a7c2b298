import { describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/common/actor.js';
import { DomainError } from '../../src/domain/common/errors.js';
import {
  decide,
  expire,
  nextExpiry,
  withdraw,
  type ApprovalRecord,
  type ExecutionApprovals,
} from '../../src/domain/execution/approval.js';

const requester: Actor = { type: 'api_key', id: 'key_req', name: 'requester' };
const alice: Actor = { type: 'slack_user', id: 'UALICE', name: 'alice' };
const mallory: Actor = { type: 'slack_user', id: 'UMALLORY', name: 'mallory' };
const NOW = new Date('2026-11-22T10:00:00.000Z');

function record(key: string, over: Partial<ApprovalRecord> = {}): ApprovalRecord {
  return {
    audience_id: `aud_${key}`,
    audience_key: key,
    approvers: { slack_user_ids: ['UALICE'] },
    four_eyes: true,
    delivery_ids: [`dlv_${key}`],
    state: 'pending',
    requested_by: requester,
    requested_at: '2026-11-22T09:00:00.000Z',
    expires_at: '2026-11-22T11:00:00.000Z',
    decided_by: null,
    decided_at: null,
    reason: null,
    notified_state: null,
    ...over,
  };
}

const approvals = (...rs: ApprovalRecord[]): ExecutionApprovals => ({
  execution_id: 'exe_1',
  incident_id: 'inc_1',
  audiences: rs,
  rev: 1,
});

const codeOf = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    if (e instanceof DomainError) return e.code;
    throw e;
  }
  return 'none';
};

describe('the approval state machine', () => {
  it('an approver approves every pending audience they may decide, once', () => {
    const { next, decided } = decide(
      approvals(record('customers'), record('execs')),
      { decision: 'approve', reason: 'ok' },
      alice,
      [],
      NOW,
    );
    expect(decided.map((r) => r.audience_key)).toEqual(['customers', 'execs']);
    expect(next.audiences.every((r) => r.state === 'approved' && r.decided_by === alice)).toBe(true);
    expect(next.rev).toBe(2);
    // Deciding again is refused: the first decision stands.
    expect(codeOf(() => decide(next, { decision: 'reject' }, alice, [], NOW))).toBe('not_pending');
  });

  it('refuses a non-approver, the requester under four-eyes, and unknown audiences', () => {
    const a = approvals(record('customers'));
    expect(codeOf(() => decide(a, { decision: 'approve' }, mallory, [], NOW))).toBe('not_an_approver');
    const own = approvals(record('customers', { requested_by: alice }));
    expect(codeOf(() => decide(own, { decision: 'approve' }, alice, [], NOW))).toBe('four_eyes');
    const relaxed = approvals(record('customers', { requested_by: alice, four_eyes: false }));
    expect(decide(relaxed, { decision: 'approve' }, alice, [], NOW).decided).toHaveLength(1);
    expect(codeOf(() => decide(a, { decision: 'approve', audiences: ['nope'] }, alice, [], NOW))).toBe(
      'unknown_audience',
    );
  });

  it('an API key decides only when the audience lists one of its scopes and it holds approvals:write', () => {
    const byKey = approvals(
      record('customers', { approvers: { slack_user_ids: [], api_key_scopes: ['incidents:execute'] } }),
    );
    const key: Actor = { type: 'api_key', id: 'key_ops', name: 'ops' };
    expect(codeOf(() => decide(byKey, { decision: 'approve' }, key, ['approvals:write'], NOW))).toBe('not_an_approver');
    expect(codeOf(() => decide(byKey, { decision: 'approve' }, key, ['incidents:execute'], NOW))).toBe(
      'not_an_approver',
    );
    expect(
      decide(byKey, { decision: 'approve' }, key, ['approvals:write', 'incidents:execute'], NOW).decided,
    ).toHaveLength(1);
    expect(decide(byKey, { decision: 'approve' }, key, ['*'], NOW).decided).toHaveLength(1);
  });

  it('a pending approval past its expiry cannot be decided; expire records it, nextExpiry follows', () => {
    const late = approvals(record('customers', { expires_at: '2026-11-22T09:59:59.000Z' }), record('execs'));
    expect(codeOf(() => decide(late, { decision: 'approve', audiences: ['customers'] }, alice, [], NOW))).toBe(
      'not_pending',
    );
    expect(nextExpiry(late)).toBe(Date.parse('2026-11-22T09:59:59.000Z'));
    const out = expire(late, NOW)!;
    expect(out.decided.map((r) => [r.audience_key, r.state])).toEqual([['customers', 'expired']]);
    expect(nextExpiry(out.next)).toBe(Date.parse('2026-11-22T11:00:00.000Z'));
    expect(expire(out.next, NOW)).toBeNull();
  });

  it('withdraw rejects what is pending, by the retracting actor, and leaves decided ones alone', () => {
    const a = approvals(record('customers'), record('execs', { state: 'approved', decided_by: alice }));
    const out = withdraw(a, requester, 'Retracted: wrong incident', NOW)!;
    expect(out.decided.map((r) => r.audience_key)).toEqual(['customers']);
    expect(out.next.audiences[0]).toMatchObject({
      state: 'rejected',
      decided_by: requester,
      reason: 'Retracted: wrong incident',
    });
    expect(out.next.audiences[1]!.state).toBe('approved');
    expect(withdraw(out.next, requester, 'again', NOW)).toBeNull();
  });
});
