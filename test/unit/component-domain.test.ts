import { describe, expect, it } from 'vitest';
import {
  affectedBy,
  applyComponentPatch,
  ComponentCreateSchema,
  ComponentImpactsSchema,
  ComponentPatchSchema,
  componentWire,
  effectiveStatus,
  newComponent,
  withImpact,
  type StoredComponent,
} from '../../src/domain/component/component.js';
import { applyPatch, incidentImpactOf, newIncident } from '../../src/domain/incident/incident.js';
import { isDomainError } from '../../src/domain/common/errors.js';

const T0 = '2026-11-27T10:00:00.000Z';
const T1 = '2026-11-27T11:00:00.000Z';
const INC_A = 'inc_01JH3ZK6X2B8V4N0Q7R5T9W1YA';
const INC_B = 'inc_01JH3ZK6X2B8V4N0Q7R5T9W1YB';
const MNT = 'mnt_01JH3ZK6X2B8V4N0Q7R5T9W1YC';

const base = (input: Record<string, unknown> = {}): StoredComponent =>
  newComponent('cmp_01JH3ZK6X2B8V4N0Q7R5T9W1YD', ComponentCreateSchema.parse({ name: 'API', ...input }), 3, T0);

describe('effective status', () => {
  it('is the manual status while nothing impacts the component', () => {
    expect(effectiveStatus(base())).toBe('operational');
    expect(effectiveStatus(base({ status: 'partial_outage' }))).toBe('partial_outage');
  });

  it('is the worst open impact, even when the manual status is worse', () => {
    const c = { ...base({ status: 'major_outage' }), impacts: { [INC_A]: 'degraded_performance' as const } };
    expect(effectiveStatus(c)).toBe('degraded_performance');
    const two = { ...c, impacts: { [INC_A]: 'degraded_performance' as const, [INC_B]: 'partial_outage' as const } };
    expect(effectiveStatus(two)).toBe('partial_outage');
    const maint = { ...c, impacts: { [MNT]: 'under_maintenance' as const, [INC_A]: 'degraded_performance' as const } };
    expect(effectiveStatus(maint)).toBe('degraded_performance');
    expect(effectiveStatus({ ...c, impacts: { [MNT]: 'under_maintenance' as const } })).toBe('under_maintenance');
  });

  it('affected_by names each source by kind, oldest source first', () => {
    const c = { ...base(), impacts: { [MNT]: 'under_maintenance' as const, [INC_B]: 'major_outage' as const } };
    expect(affectedBy(c)).toEqual([
      { kind: 'incident', id: INC_B, status: 'major_outage' },
      { kind: 'maintenance', id: MNT, status: 'under_maintenance' },
    ]);
    expect(componentWire(c)).toMatchObject({ status: 'major_outage', manual_status: 'operational' });
    expect(componentWire(c)).not.toHaveProperty('impacts');
    expect(componentWire(c)).not.toHaveProperty('rev');
  });

  it('withImpact sets and removes an impact as a new revision, and is a no-op otherwise', () => {
    const c = base();
    const on = withImpact(c, INC_A, 'major_outage', T1);
    expect(on).toMatchObject({ impacts: { [INC_A]: 'major_outage' }, rev: 2, updated_at: T1 });
    expect(withImpact(on, INC_A, 'major_outage', T1)).toBe(on);
    expect(withImpact(c, INC_A, null, T1)).toBe(c);
    expect(withImpact(on, INC_A, null, T1)).toMatchObject({ impacts: {}, rev: 3 });
  });
});

describe('component create and patch rules', () => {
  it('create defaults: empty description, no group, operational, shown; position given or the default', () => {
    const c = base();
    expect(c).toMatchObject({
      description: '',
      group: null,
      manual_status: 'operational',
      show_on_status_page: true,
      position: 3,
      impacts: {},
      rev: 1,
    });
    expect(base({ position: 0 }).position).toBe(0);
  });

  it('a patch changes what it sends; status sets the manual status; group null ungroups', () => {
    const c = base({ group: 'Core' });
    const next = applyComponentPatch(c, ComponentPatchSchema.parse({ status: 'major_outage', group: null }), T1);
    expect(next).toMatchObject({ manual_status: 'major_outage', group: null, name: 'API', rev: 2, updated_at: T1 });
  });

  it('a patch that changes nothing is the component itself; an empty one is refused', () => {
    const c = base();
    expect(applyComponentPatch(c, ComponentPatchSchema.parse({ name: 'API', status: 'operational' }), T1)).toBe(c);
    try {
      applyComponentPatch(c, {}, T1);
      expect.unreachable();
    } catch (e) {
      expect(isDomainError(e) && e.errors[0]?.code).toBe('empty_patch');
    }
  });

  it('the schemas refuse what the API refuses', () => {
    expect(ComponentCreateSchema.safeParse({ name: '  ' }).success).toBe(false);
    expect(ComponentCreateSchema.safeParse({ name: 'x', status: 'down' }).success).toBe(false);
    expect(ComponentCreateSchema.safeParse({ name: 'x', position: 1.5 }).success).toBe(false);
    expect(ComponentCreateSchema.safeParse({ name: 'x', impacts: {} }).success).toBe(false);
    expect(ComponentPatchSchema.safeParse({ manual_status: 'operational' }).success).toBe(false);
    expect(ComponentImpactsSchema.safeParse([{ id: 'cmp_x', status: 'under_maintenance' }]).success).toBe(false);
    expect(
      ComponentImpactsSchema.safeParse(
        Array.from({ length: 51 }, (_, i) => ({ id: `cmp_${i}`, status: 'major_outage' })),
      ).success,
    ).toBe(false);
  });
});

describe("an incident's impact", () => {
  const actor = { type: 'api_key' as const, id: 'key_1', name: 'k' };
  const inc = newIncident(
    INC_A,
    {
      title: 't',
      severity: 'major',
      description: '',
      impact: '',
      template_ids: [],
      components: [{ id: 'cmp_1', status: 'partial_outage' }],
    },
    actor,
    T0,
  );

  it('applies while open, not once resolved or closed', () => {
    expect(incidentImpactOf(inc, 'cmp_1')).toBe('partial_outage');
    expect(incidentImpactOf(inc, 'cmp_2')).toBeNull();
    expect(incidentImpactOf({ ...inc, status: 'monitoring' }, 'cmp_1')).toBe('partial_outage');
    expect(incidentImpactOf({ ...inc, status: 'resolved' }, 'cmp_1')).toBeNull();
    expect(incidentImpactOf({ ...inc, status: 'closed' }, 'cmp_1')).toBeNull();
  });

  it('a patch of the list is a change (incident.updated), the same list is not', () => {
    const same = applyPatch(inc, { components: [{ id: 'cmp_1', status: 'partial_outage' }] }, T1);
    expect(same.next).toBe(inc);
    const moved = applyPatch(inc, { components: [{ id: 'cmp_1', status: 'major_outage' }] }, T1);
    expect(moved.changes).toEqual({
      components: { from: [{ id: 'cmp_1', status: 'partial_outage' }], to: [{ id: 'cmp_1', status: 'major_outage' }] },
    });
    expect(moved.next.rev).toBe(2);
  });
});
