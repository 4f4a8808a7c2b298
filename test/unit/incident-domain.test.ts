import { describe, expect, it } from 'vitest';
import type { DomainError } from '../../src/domain/common/errors.js';
import { applyPatch, closeIncident, newIncident, type Incident } from '../../src/domain/incident/incident.js';

const actor = { type: 'system' as const, id: 't', name: 't' };
const base = (): Incident =>
  newIncident(
    'inc_01',
    { title: 't', severity: 'minor', description: '', impact: '', template_ids: [] },
    actor,
    '2026-01-01T00:00:00.000Z',
  );
const T1 = '2026-01-01T01:00:00.000Z';

const codeOf = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    return (e as DomainError).code;
  }
  return 'no error';
};

describe('incident state machine', () => {
  it('moves between open states and to resolved, stamping resolved_at', () => {
    const a = applyPatch(base(), { status: 'monitoring' }, T1);
    expect(a.statusChange).toEqual({ from: 'investigating', to: 'monitoring' });
    const r = applyPatch(a.next, { status: 'resolved' }, T1);
    expect(r.next.resolved_at).toBe(T1);
    const reopened = applyPatch(r.next, { status: 'identified' }, '2026-01-01T02:00:00.000Z');
    expect(reopened.next.resolved_at).toBeNull();
  });

  it('treats setting the current value as a no-op (same object, same updated_at)', () => {
    const i = base();
    const out = applyPatch(i, { status: 'investigating', title: 't' }, T1);
    expect(out.next).toBe(i);
    expect(out.statusChange).toBeNull();
  });

  it('refuses closed via PATCH, empty patches and any write to a closed incident', () => {
    expect(codeOf(() => applyPatch(base(), { status: 'closed' }, T1))).toBe('use_close_endpoint');
    expect(codeOf(() => applyPatch(base(), {}, T1))).toBe('validation_failed');
    const closed = closeIncident(base(), {}, T1);
    expect(closed.status).toBe('closed');
    expect(closed.resolved_at).toBe(T1);
    expect(codeOf(() => applyPatch(closed, { title: 'x' }, T1))).toBe('incident_closed');
    expect(codeOf(() => closeIncident(closed, {}, T1))).toBe('incident_closed');
  });

  it('records only real changes', () => {
    const out = applyPatch(base(), { title: 'new', severity: 'minor', impact: 'x' }, T1);
    expect(out.changes).toEqual({ title: { from: 't', to: 'new' }, impact: { from: '', to: 'x' } });
    expect(out.next.rev).toBe(2);
  });
});
