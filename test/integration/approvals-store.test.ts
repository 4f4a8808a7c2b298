import { afterEach, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/common/actor.js';
import type { DomainError } from '../../src/domain/common/errors.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import type { ExecutionApprovals } from '../../src/domain/execution/approval.js';
import { newDelivery, type Delivery, type Execution } from '../../src/domain/execution/execution.js';
import { newIncident } from '../../src/domain/incident/incident.js';
import type { ApprovalNotice, DispatchBatch } from '../../src/ports/index.js';
import { ApprovalService, LateApprovalNotifier } from '../../src/services/approvals.js';
import { RedisApprovalRepo } from '../../src/store/approvals.js';
import { RedisConversationRepo } from '../../src/store/conversations.js';
import { RedisExecutionRepo } from '../../src/store/executions.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { createKeys } from '../../src/store/keys.js';
import { dropPrefix, useTestRedis } from '../support/redis.js';

/**
 * The approval commit over the real store (src/store/approvals.ts): a decision is one
 * compare-and-set, so two deciders at once make one decision, an approve racing the expiry makes
 * one, and what is released enters the outbox exactly once. Time is an injected clock per service.
 */
const db = useTestRedis('approvals');
const ids = createIdGenerator();
const requester: Actor = { type: 'api_key', id: 'key_req', name: 'requester' };
const alice: Actor = { type: 'slack_user', id: 'UALICE', name: 'alice' };
const bob: Actor = { type: 'slack_user', id: 'UBOB', name: 'bob' };
const T0 = Date.parse('2026-11-25T10:00:00.000Z');
const HOUR = 3_600_000;

let used: string[] = [];
afterEach(async () => {
  for (const p of used) await dropPrefix(db.redis, p);
  used = [];
});

async function world() {
  const prefix = `${db.prefix}-${used.length}-${Math.random().toString(36).slice(2, 8)}`;
  used.push(prefix);
  const keys = createKeys(prefix);
  const incidents = new RedisIncidentRepo(db.redis, keys);
  const executions = new RedisExecutionRepo(db.redis, keys);
  const approvals = new RedisApprovalRepo(db.redis, keys);
  const conversations = new RedisConversationRepo(db.redis, keys);
  const incident = newIncident(
    ids.next('incident'),
    { title: 'Checkout down', severity: 'major', description: '', impact: '', template_ids: [] },
    requester,
    new Date(T0).toISOString(),
  );
  expect(await incidents.create(incident, [])).toBe(true);
  const executionId = ids.next('execution');
  const held: Delivery[] = ['con_a', 'con_b'].map((c) =>
    newDelivery({
      id: ids.next('delivery'),
      executionId,
      incidentId: incident.id,
      connectionId: c,
      connectionType: 'webhook',
      templateId: null,
      templateVersion: null,
      content: { subject: 's', body: 'b' },
      audience: 'customers',
      held: true,
    }),
  );
  const execution: Execution = {
    id: executionId,
    incident_id: incident.id,
    variables: {},
    created_at: new Date(T0).toISOString(),
    template_versions: {},
    delivery_ids: held.map((d) => d.id),
    audiences: [
      {
        key: 'customers',
        name: 'Customers',
        visibility: 'external',
        delivery_ids: held.map((d) => d.id),
        skipped: null,
        approval_required: true,
      },
    ],
  };
  const record: ExecutionApprovals = {
    execution_id: executionId,
    incident_id: incident.id,
    rev: 1,
    audiences: [
      {
        audience_id: 'aud_customers',
        audience_key: 'customers',
        approvers: { slack_user_ids: ['UALICE', 'UBOB'] },
        four_eyes: true,
        delivery_ids: held.map((d) => d.id),
        state: 'pending',
        requested_by: requester,
        requested_at: new Date(T0).toISOString(),
        expires_at: new Date(T0 + HOUR).toISOString(),
        decided_by: null,
        decided_at: null,
        reason: null,
        notified_state: null,
      },
    ],
  };
  const stored = (await incidents.get(incident.id))!;
  expect(
    await executions.create(
      execution,
      held,
      stored,
      { ...stored, rev: stored.rev + 1 },
      [],
      Object.assign(new Map(), { revision: null }),
      record,
    ),
  ).toBe(true);
  const dispatched: DispatchBatch[] = [];
  const notices: ApprovalNotice[] = [];
  const service = (nowMs: number, notify?: ((n: ApprovalNotice) => Promise<void>) | null) => {
    const notifier = new LateApprovalNotifier();
    notifier.attach(
      notify === null
        ? null
        : {
            notify:
              notify ??
              ((n) => {
                notices.push(n);
                return Promise.resolve();
              }),
          },
    );
    return new ApprovalService({
      incidents,
      repo: executions,
      approvals,
      conversations,
      dispatch: (b) => {
        dispatched.push(...b);
        return Promise.resolve();
      },
      clock: { now: () => new Date(nowMs) },
      ids,
      notifier,
      leaseMs: 1000,
    });
  };
  const outbox = async () => db.redis.zrange(keys.deliveryOutbox(), '0', '-1');
  const events = async () =>
    (await db.redis.lrange(keys.incidentEvents(incident.id), '0', '-1')).map(
      (e) => (JSON.parse(e) as { type: string }).type,
    );
  return { incident, execution, held, executions, approvals, service, outbox, events, dispatched, notices, keys };
}

const settle = (ps: Promise<unknown>[]) => Promise.allSettled(ps);

describe('the approval commit', () => {
  it('holds the deliveries out of the outbox and indexes the pending approval', async () => {
    const w = await world();
    expect(await w.outbox()).toEqual([]);
    expect(await db.redis.smembers(w.keys.audiencePendingApprovals('aud_customers'))).toEqual([w.execution.id]);
    expect(await db.redis.zscore(w.keys.approvalsDue(), w.execution.id)).toBe(String(T0 + HOUR));
  });

  it('two approvers at the same moment: one decision, each held delivery released once', async () => {
    const w = await world();
    const s = w.service(T0 + 1000);
    const results = await settle([
      s.decide(w.incident.id, w.execution.id, { decision: 'approve' }, alice),
      s.decide(w.incident.id, w.execution.id, { decision: 'approve' }, bob),
      s.decide(w.incident.id, w.execution.id, { decision: 'reject', reason: 'no' }, bob),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect((r.reason as DomainError).code).toBe('not_pending');
    const rec = (await w.approvals.get(w.execution.id))!;
    const events = await w.events();
    expect(events.filter((t) => t === 'execution.approved' || t === 'execution.rejected')).toHaveLength(1);
    const ds = await w.executions.getDeliveries(w.held.map((d) => d.id));
    if (rec.audiences[0]!.state === 'approved') {
      expect(ds.map((d) => d!.status)).toEqual(['queued', 'queued']);
      expect((await w.outbox()).sort()).toEqual(w.held.map((d) => d.id).sort());
      // Each took its place in its own conversation.
      expect(ds.map((d) => d!.sequence)).toEqual([1, 1]);
    } else {
      expect(ds.map((d) => d!.status)).toEqual(['cancelled', 'cancelled']);
      expect(await w.outbox()).toEqual([]);
    }
    expect(await db.redis.smembers(w.keys.audiencePendingApprovals('aud_customers'))).toEqual([]);
    expect(await db.redis.zscore(w.keys.approvalsDue(), w.execution.id)).toBeNull();
  });

  it('an approve racing the expiry: exactly one of them is recorded, and the deliveries agree', async () => {
    for (let round = 0; round < 5; round++) {
      const w = await world();
      const before = w.service(T0 + HOUR - 1);
      const after = w.service(T0 + HOUR + 1);
      const results = await settle([
        before.decide(w.incident.id, w.execution.id, { decision: 'approve' }, alice),
        after.runDue(),
      ]);
      const rec = (await w.approvals.get(w.execution.id))!;
      const state = rec.audiences[0]!.state;
      expect(['approved', 'expired']).toContain(state);
      const ds = await w.executions.getDeliveries(w.held.map((d) => d.id));
      expect(ds.map((d) => d!.status)).toEqual(
        state === 'approved' ? ['queued', 'queued'] : ['cancelled', 'cancelled'],
      );
      expect(results[0]!.status === 'fulfilled').toBe(state === 'approved');
      const events = await w.events();
      expect(events.filter((t) => t === 'execution.approved' || t === 'execution.approval_expired')).toHaveLength(1);
    }
  });

  it('the requester may not approve under four-eyes, a stranger not at all; nothing changes', async () => {
    const w = await world();
    const s = w.service(T0 + 1000);
    const codes = await settle([
      s.decide(w.incident.id, w.execution.id, { decision: 'approve' }, { ...requester }),
      s.decide(w.incident.id, w.execution.id, { decision: 'approve' }, { type: 'slack_user', id: 'UEVE', name: 'eve' }),
    ]);
    expect(codes.map((r) => (r.status === 'rejected' ? (r.reason as DomainError).code : 'ok'))).toEqual([
      'not_an_approver',
      'not_an_approver',
    ]);
    expect((await w.approvals.get(w.execution.id))!.audiences[0]!.state).toBe('pending');
  });

  it('a notice that failed is told again by the sweep, then recorded as told', async () => {
    const w = await world();
    let fail = true;
    const told: string[] = [];
    const s = w.service(T0 + 1000, (n) => {
      if (fail) return Promise.reject(new Error('slack down'));
      told.push(`${n.audience.key}:${n.audience.approval?.state}`);
      return Promise.resolve();
    });
    expect(await s.runDue()).toBe(0);
    expect((await w.approvals.get(w.execution.id))!.audiences[0]!.notified_state).toBeNull();
    fail = false;
    // The failed try left its lease; a sweep after the lease tells it.
    const later = w.service(T0 + 5000, (n) => {
      told.push(`${n.audience.key}:${n.audience.approval?.state}`);
      return Promise.resolve();
    });
    await later.runDue();
    expect(told).toEqual(['customers:pending']);
    expect((await w.approvals.get(w.execution.id))!.audiences[0]!.notified_state).toBe('pending');
    expect(await db.redis.zscore(w.keys.approvalsToNotify(), w.execution.id)).toBeNull();
  });

  it('a process with nobody to tell leaves the notice to the sweep; the sweep with nobody records it', async () => {
    const w = await world();
    const apiOnly = w.service(T0 + 1000, null);
    await apiOnly.notifyOne(w.execution.id);
    expect((await w.approvals.get(w.execution.id))!.audiences[0]!.notified_state).toBeNull();
    await apiOnly.runDue();
    expect((await w.approvals.get(w.execution.id))!.audiences[0]!.notified_state).toBe('pending');
  });
});
