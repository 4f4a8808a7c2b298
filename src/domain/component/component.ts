import { z } from 'zod';
import { DomainError, emptyPatch } from '../common/errors.js';
import { ID_PREFIX } from '../common/ids.js';
import { LIMITS } from '../common/limits.js';
import { noRepeats } from '../common/validation.js';
import { COMPONENT_STATUS_RANK, COMPONENT_STATUSES, type ComponentStatus } from '../status/public.js';

/**
 * Components (docs/api.md, Components): the parts of the service the public status page lists.
 * A component has a manual status (what an operator last set) and impacts: the open incidents
 * and maintenances naming it, each with the status it causes. What it shows is the effective
 * status, the worst open impact, else the manual status. The request schemas, the stored record
 * and the pure rules live here; atomicity and the history are the store's (store/components.ts).
 */

export { COMPONENT_STATUSES, type ComponentStatus };

export const ComponentStatusSchema = z.enum(COMPONENT_STATUSES).meta({
  id: 'ComponentStatus',
  description:
    '`operational`, `under_maintenance`, `degraded_performance`, `partial_outage` or `major_outage` (from best to worst).',
});

/** What an incident may say about a component: every status but `under_maintenance` (maintenances' own). */
export const INCIDENT_IMPACT_STATUSES = COMPONENT_STATUSES.filter(
  (s): s is Exclude<ComponentStatus, 'under_maintenance'> => s !== 'under_maintenance',
);

/** Kinds of source that impact a component, told apart by their id prefix. */
export const IMPACT_KINDS = ['incident', 'maintenance'] as const;
export type ImpactKind = (typeof IMPACT_KINDS)[number];

export function impactKind(sourceId: string): ImpactKind {
  return sourceId.startsWith(`${ID_PREFIX.maintenance}_`) ? 'maintenance' : 'incident';
}

// ── request shapes ───────────────────────────────────────────────────────────────────────────

const name = z
  .string()
  .trim()
  .min(1, 'name is required.')
  .max(LIMITS.componentName, `name is at most ${LIMITS.componentName} characters.`)
  .meta({ description: 'Unique, ignoring case.', example: 'API' });
const description = z.string().max(LIMITS.longText, `description is at most ${LIMITS.longText} characters.`);
const group = z
  .string()
  .trim()
  .min(1, 'group is a non-empty name, or null for none.')
  .max(LIMITS.componentGroup, `group is at most ${LIMITS.componentGroup} characters.`)
  .nullable()
  .meta({
    description: 'The one-level group the page shows it under (components with the same group name); null: none.',
  });
const position = z
  .int('position is a whole number.')
  .min(0, 'position is 0 or more.')
  .max(LIMITS.componentPosition, `position is at most ${LIMITS.componentPosition}.`)
  .meta({ description: 'Order on the page within its group (lowest first; ties by name).' });
const manualStatus = ComponentStatusSchema.meta({
  description: 'Sets the manual status: what the component shows while no open incident or maintenance impacts it.',
});
const showOnStatusPage = z.boolean().meta({ description: 'Listed on the public status page.' });

export const ComponentCreateSchema = z
  .strictObject({
    name,
    description: description.default(''),
    group: group.default(null),
    position: position.optional().meta({ description: 'Order within its group; default: after the last one.' }),
    status: manualStatus.default('operational'),
    show_on_status_page: showOnStatusPage.default(true),
  })
  .meta({
    id: 'ComponentCreate',
    example: { name: 'API', description: 'The public REST API.', group: 'Platform', status: 'operational' },
  });
export type ComponentCreate = z.output<typeof ComponentCreateSchema>;

export const ComponentPatchSchema = z
  .strictObject({
    name: name.optional(),
    description: description.optional(),
    group: group.optional(),
    position: position.optional(),
    status: manualStatus.optional(),
    show_on_status_page: showOnStatusPage.optional(),
  })
  .meta({
    id: 'ComponentPatch',
    example: { status: 'degraded_performance' },
    description: 'Fields sent replace, fields left out are kept.',
  });
export type ComponentPatch = z.output<typeof ComponentPatchSchema>;

/**
 * An incident's affected components: `[{id, status}]`, each id once, at most
 * LIMITS.incidentComponents. Whether the ids exist is the service's check.
 */
export const ComponentImpactSchema = z
  .strictObject({
    id: z.string().min(1).max(64).meta({ example: 'cmp_01JH3ZK6X2B8V4N0Q7R5T9W1YC' }),
    status: z.enum(INCIDENT_IMPACT_STATUSES).meta({ description: 'The status the incident causes while open.' }),
  })
  .meta({ id: 'ComponentImpact' });

export const ComponentImpactsSchema = z
  .array(ComponentImpactSchema)
  .max(LIMITS.incidentComponents, `At most ${LIMITS.incidentComponents} components.`)
  .superRefine(noRepeats((c) => c.id, ['id']))
  .meta({
    description:
      'Components this incident affects, with the status each shows while the incident is open (resolve and close restore them). Replaces the list as a whole.',
  });
export type ComponentImpacts = z.output<typeof ComponentImpactsSchema>;

// ── the wire shape and the stored record ─────────────────────────────────────────────────────

export const AffectedBySchema = z
  .object({
    kind: z.enum(IMPACT_KINDS),
    id: z.string().meta({ example: 'inc_01JH3ZK6X2B8V4N0Q7R5T9W1YC' }),
    status: ComponentStatusSchema,
  })
  .meta({ id: 'ComponentAffectedBy' });

export const ComponentSchema = z
  .object({
    id: z.string().meta({ example: 'cmp_01JH3ZK6X2B8V4N0Q7R5T9W1YC' }),
    name: z.string(),
    description: z.string(),
    group: z.string().nullable(),
    position: z.int(),
    status: ComponentStatusSchema.meta({
      description: 'Effective status: the worst of `affected_by`, else `manual_status`.',
    }),
    manual_status: ComponentStatusSchema,
    show_on_status_page: z.boolean(),
    affected_by: z
      .array(AffectedBySchema)
      .meta({ description: 'The open incidents and active maintenances impacting it.' }),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({
    id: 'Component',
    example: {
      id: 'cmp_01JH3ZK6X2B8V4N0Q7R5T9W1YC',
      name: 'API',
      description: 'The public REST API.',
      group: 'Platform',
      position: 0,
      status: 'partial_outage',
      manual_status: 'operational',
      show_on_status_page: true,
      affected_by: [{ kind: 'incident', id: 'inc_01JH3ZK6X2B8V4N0Q7R5T9W1YD', status: 'partial_outage' }],
      created_at: '2026-11-22T10:00:00.000Z',
      updated_at: '2026-11-22T10:00:00.000Z',
    },
  });
export type ComponentWire = z.infer<typeof ComponentSchema>;

/**
 * The stored component (JSON at `cmp:<id>`): the wire shape without its derived fields
 * (`status`, `affected_by`), plus `impacts` (source id → the status it causes) and `rev`, its
 * ETag and compare-and-set revision. Impacts change the record but not `rev`: an incident moving
 * does not make an operator's If-Match stale.
 */
export interface StoredComponent {
  id: string;
  name: string;
  description: string;
  group: string | null;
  position: number;
  manual_status: ComponentStatus;
  show_on_status_page: boolean;
  impacts: Record<string, ComponentStatus>;
  created_at: string;
  updated_at: string;
  rev: number;
}

// ── rules ────────────────────────────────────────────────────────────────────────────────────

/** The worst of two statuses by COMPONENT_STATUS_RANK. */
export function worseStatus(a: ComponentStatus, b: ComponentStatus): ComponentStatus {
  return COMPONENT_STATUS_RANK[b] > COMPONENT_STATUS_RANK[a] ? b : a;
}

/** What the component shows: the worst open impact, else its manual status. */
export function effectiveStatus(c: Pick<StoredComponent, 'manual_status' | 'impacts'>): ComponentStatus {
  let worst: ComponentStatus | null = null;
  for (const s of Object.values(c.impacts)) worst = worst === null ? s : worseStatus(worst, s);
  return worst ?? c.manual_status;
}

/** The impacts as the wire lists them: ordered by source id (ULIDs: oldest source first). */
export function affectedBy(c: Pick<StoredComponent, 'impacts'>): ComponentWire['affected_by'] {
  return Object.keys(c.impacts)
    .sort()
    .map((id) => ({ kind: impactKind(id), id, status: c.impacts[id]! }));
}

/**
 * The component once source `sourceId` impacts it with `status` (null: no longer): a new
 * revision, or the component itself when that is already so.
 */
export function withImpact(
  c: StoredComponent,
  sourceId: string,
  status: ComponentStatus | null,
  now: string,
): StoredComponent {
  if ((c.impacts[sourceId] ?? null) === status) return c;
  const impacts = { ...c.impacts };
  if (status === null) delete impacts[sourceId];
  else impacts[sourceId] = status;
  return { ...c, impacts, rev: c.rev + 1, updated_at: now };
}

/** The component as the API shows it: the record without `impacts` and `rev`, with its effective status. */
export function componentWire(c: StoredComponent): ComponentWire {
  return {
    id: c.id,
    name: c.name,
    description: c.description,
    group: c.group,
    position: c.position,
    status: effectiveStatus(c),
    manual_status: c.manual_status,
    show_on_status_page: c.show_on_status_page,
    affected_by: affectedBy(c),
    created_at: c.created_at,
    updated_at: c.updated_at,
  };
}

/** The key names are unique under: case and compatibility forms folded. */
export function componentNameKey(componentName: string): string {
  return componentName.normalize('NFKC').toLowerCase();
}

export function newComponent(id: string, input: ComponentCreate, position: number, now: string): StoredComponent {
  return {
    id,
    name: input.name,
    description: input.description,
    group: input.group,
    position: input.position ?? position,
    manual_status: input.status,
    show_on_status_page: input.show_on_status_page,
    impacts: {},
    created_at: now,
    updated_at: now,
    rev: 1,
  };
}

/**
 * Applies a PATCH: a new revision when anything changes, the component itself when nothing does.
 * `status` sets the manual status (the effective one may still be decided by an impact).
 */
export function applyComponentPatch(current: StoredComponent, patch: ComponentPatch, now: string): StoredComponent {
  if (Object.keys(patch).length === 0) throw emptyPatch();
  const content: StoredComponent = {
    ...current,
    name: patch.name ?? current.name,
    description: patch.description ?? current.description,
    group: patch.group === undefined ? current.group : patch.group,
    position: patch.position ?? current.position,
    manual_status: patch.status ?? current.manual_status,
    show_on_status_page: patch.show_on_status_page ?? current.show_on_status_page,
  };
  if (JSON.stringify(content) === JSON.stringify(current)) return current;
  return { ...content, rev: current.rev + 1, updated_at: now };
}

/** 409 `component_in_use`: a delete while open incidents or maintenances name the component. */
export function componentInUse(c: StoredComponent, sourceIds: string[]): DomainError {
  const shown = [...new Set(sourceIds)].sort().slice(0, 10);
  return new DomainError(
    'component_in_use',
    `Component "${c.name}" is named by ${shown.join(', ')}; resolve the incidents (or complete the maintenances) or take the component out of them before deleting it.`,
    shown.map((id, i) => ({
      field: `affected_by.${i}`,
      code: 'component_in_use',
      message: `${impactKind(id) === 'incident' ? 'Incident' : 'Maintenance'} ${id} names this component.`,
    })),
  );
}
