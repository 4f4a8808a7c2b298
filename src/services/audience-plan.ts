import type { Audience } from '../domain/audience/audience.js';
import { DomainError } from '../domain/common/errors.js';
import type { Template } from '../domain/template/template.js';
import type { ExecuteConnection, Pair } from './execution-plan.js';

/**
 * Which (connection × template) pairs each audience of an execute gets (docs/explanation/approval.md),
 * pure: an audience reaches its own connections that exist and are enabled, with the incident's
 * templates narrowed to its own (all of them when it lists none; the built-in message when the
 * incident has none and the audience lists none), each template's own connection targeting still
 * applied. One that gets nothing is reported, not dropped; a pair reached through several
 * audiences is one delivery, attributed to one that requires approval if any (so an approval is
 * never bypassed), else to the first listed.
 */

export type SkipReason = 'no_templates' | 'no_connections';

export interface AudiencePart {
  audience: Audience;
  /** The pairs attributed to this audience (after de-duplication across audiences). */
  pairs: Pair[];
  /** Every pair the audience would get on its own (before de-duplication): what `prepare` shows. */
  own: Pair[];
  skipped: { reason: SkipReason; message: string } | null;
}

export interface AudiencePlan {
  parts: AudiencePart[];
  /** Every pair once, in the order of the parts, with its audience. */
  pairs: (Pair & { audience: Audience })[];
  /** The templates some pair uses. */
  used: Template[];
}

/** The pairs one audience would get, or why it gets none. */
export function audiencePairs(
  audience: Pick<Audience, 'key' | 'connection_ids' | 'template_ids'>,
  connections: readonly ExecuteConnection[],
  incidentTemplates: readonly Template[],
): { pairs: Pair[]; skipped: AudiencePart['skipped'] } {
  const byId = new Map(connections.map((c) => [c.id, c]));
  const reached = audience.connection_ids
    .map((id) => byId.get(id))
    .filter((c): c is ExecuteConnection => c !== undefined && c.enabled);
  if (reached.length === 0)
    return {
      pairs: [],
      skipped: {
        reason: 'no_connections',
        message:
          audience.connection_ids.length === 0
            ? `Audience ${audience.key} has no connections.`
            : `None of audience ${audience.key}'s connections is enabled.`,
      },
    };
  let templates: (Template | null)[];
  if (audience.template_ids.length === 0) templates = incidentTemplates.length === 0 ? [null] : [...incidentTemplates];
  else templates = incidentTemplates.filter((t) => audience.template_ids.includes(t.id));
  if (templates.length === 0)
    return {
      pairs: [],
      skipped: {
        reason: 'no_templates',
        message: `None of audience ${audience.key}'s templates is attached to this incident.`,
      },
    };
  const pairs: Pair[] = [];
  for (const t of templates)
    for (const c of reached)
      if (t === null || t.connection_ids.length === 0 || t.connection_ids.includes(c.id))
        pairs.push({ connection: c, template: t });
  if (pairs.length === 0)
    return {
      pairs,
      skipped: {
        reason: 'no_connections',
        message: `The templates audience ${audience.key} gets target none of its connections.`,
      },
    };
  return { pairs, skipped: null };
}

const pairKey = (p: Pair): string => `${p.connection.id}|${p.template?.id ?? ''}`;

/**
 * Plans an execute to `audiences` (in the order the caller listed them). Throws 422
 * no_connections, naming why per audience, when none of them gets anything.
 */
export function planAudiences(
  audiences: readonly Audience[],
  connections: readonly ExecuteConnection[],
  incidentTemplates: readonly Template[],
): AudiencePlan {
  const own = audiences.map((a) => ({ audience: a, ...audiencePairs(a, connections, incidentTemplates) }));
  // Who gets each pair: an audience that requires approval wins, else the first that reaches it.
  const owner = new Map<string, number>();
  own.forEach((o, i) => {
    for (const p of o.pairs) {
      const k = pairKey(p);
      const cur = owner.get(k);
      if (cur === undefined || (!own[cur]!.audience.approval.required && o.audience.approval.required)) owner.set(k, i);
    }
  });
  const parts: AudiencePart[] = own.map((o, i) => ({
    audience: o.audience,
    own: o.pairs,
    pairs: o.pairs.filter((p) => owner.get(pairKey(p)) === i),
    skipped: o.skipped,
  }));
  const pairs = parts.flatMap((part) => part.pairs.map((p) => ({ ...p, audience: part.audience })));
  if (pairs.length === 0)
    throw new DomainError(
      'no_connections',
      `No audience gets anything from this execute: ${parts.map((p) => p.skipped?.message ?? `${p.audience.key} gets nothing.`).join(' ')}`,
      parts.map((p, i) => ({
        field: `audiences.${i}`,
        code: p.skipped?.reason ?? 'no_connections',
        message: p.skipped?.message ?? `Audience ${p.audience.key} gets nothing.`,
      })),
    );
  const usedIds = new Set(pairs.map((p) => p.template?.id).filter((x): x is string => x !== undefined));
  return { parts, pairs, used: incidentTemplates.filter((t) => usedIds.has(t.id)) };
}

/**
 * The audiences an execute names, by key, in order (a repeated key counts once): 422
 * unknown_audience naming each unknown one by its index (`audiences.1`).
 */
export function resolveAudienceKeys(keys: readonly string[], found: readonly (Audience | null)[]): Audience[] {
  const errors = keys.flatMap((k, i) =>
    found[i] ? [] : [{ field: `audiences.${i}`, code: 'unknown_audience', message: `Audience ${k} does not exist.` }],
  );
  if (errors.length > 0)
    throw new DomainError(
      'unknown_audience',
      `Unknown audiences: ${errors.map((e) => keys[Number(e.field.split('.')[1])]).join(', ')}.`,
      errors,
    );
  const seen = new Set<string>();
  return found.filter((a): a is Audience => {
    if (!a || seen.has(a.id)) return false;
    seen.add(a.id);
    return true;
  });
}
