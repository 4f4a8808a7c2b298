import { describe, expect, it } from 'vitest';
import type { Template } from '../../src/domain/template/template.js';
import { ExecutionService, type ExecuteConnection, type ExecutionServiceDeps } from '../../src/services/executions.js';
import { anIncident } from '../support/factories.js';
import { DomainError } from '../../src/domain/common/errors.js';

/**
 * The cheap parts of execute the Slack edge uses inside its 3-second window: `precheck` (what
 * execute would refuse, without rendering or storing) and `preview` (only the deliveries shown are
 * rendered). Against in-memory fakes: nothing here may be stored or queued.
 */
const incident = anIncident({
  id: 'inc_01JABCDEFGHJKMNPQRSTVWXYZ0',
  title: 'Checkout down',
  description: 'd'.repeat(10_000),
});

function template(id: string, over: Partial<Template> = {}): Template {
  return {
    id,
    name: id,
    description: '',
    subject: '{{incident.title}}',
    body: '{{incident.description}} {{eta}} {{note}}',
    variants: {},
    variables: [
      { name: 'eta', description: '', required: true, default: null },
      { name: 'note', description: '', required: false, default: 'n'.repeat(4000) },
    ],
    connection_ids: [],
    version: 1,
    created_at: '2026-11-22T10:00:00.000Z',
    updated_at: '2026-11-22T10:00:00.000Z',
    variables_declared: true,
    ...over,
  };
}

/** Awaits `p`, expecting a DomainError, and returns it (anything else fails the test). */
async function catchDomainError(p: Promise<unknown>): Promise<DomainError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
  throw new Error('expected a DomainError');
}

/** An ExecutionService over fakes; the incident has every given template attached. */
function service(opts: { templates: Template[]; connections: ExecuteConnection[]; incident?: typeof incident }) {
  const stored = { ...(opts.incident ?? incident), template_ids: opts.templates.map((t) => t.id) };
  let n = 0;
  const writes: string[] = [];
  const deps = {
    incidents: { get: (id: string) => Promise.resolve(id === stored.id ? stored : null) },
    repo: {
      create: () => {
        writes.push('create');
        return Promise.resolve(true);
      },
    },
    deliveries: {},
    getTemplates: (ids: string[]) => Promise.resolve(ids.map((id) => opts.templates.find((t) => t.id === id) ?? null)),
    listConnections: () => Promise.resolve(opts.connections),
    dispatch: () => {
      writes.push('dispatch');
      return Promise.resolve();
    },
    clock: { now: () => new Date('2026-11-22T10:00:00.000Z') },
    ids: { next: (kind: string) => `${kind}_${++n}` },
    publicUrl: 'https://herald.example.com',
  } as unknown as ExecutionServiceDeps;
  return { svc: new ExecutionService(deps), writes };
}

const connections = (count: number): ExecuteConnection[] =>
  Array.from({ length: count }, (_, i) => ({ id: `con_${i}`, type: 'webhook', enabled: true, config: {} }));

describe('ExecutionService.preview', () => {
  it('renders only the deliveries it shows, counts the rest, and asks for the variables of the templates that will be sent', async () => {
    const templates = Array.from({ length: 20 }, (_, i) => template(`tpl_${i}`));
    // A template that targets no enabled connection is not sent: its variables are not asked for.
    templates.push(
      template('tpl_unused', {
        connection_ids: ['con_gone'],
        variables: [{ name: 'unused', description: '', required: true, default: null }],
        body: '{{unused}}',
      }),
    );
    const { svc, writes } = service({ templates, connections: connections(200) });
    const p = await svc.preview(incident.id, { limit: 10, placeholder: (name) => `‹${name}›` });
    expect(p.total).toBe(4000);
    expect(p.deliveries).toHaveLength(10);
    expect(p.variables.map((v) => v.name)).toEqual(['eta', 'note']);
    expect(p.deliveries[0]!.body).toContain('‹eta›');
    expect(p.deliveries[0]!.body).toContain('n'.repeat(4000));
    expect(writes).toEqual([]);
  });

  it('refuses what execute would refuse before anything is filled in', async () => {
    const { svc } = service({ templates: [template('tpl_1')], connections: [] });
    const e = await catchDomainError(svc.preview(incident.id, { limit: 10, placeholder: (n) => n }));
    expect(e.code).toBe('no_connections');
  });
});

describe('ExecutionService.precheck', () => {
  it('names missing required variables, checks the body, and stores nothing', async () => {
    const { svc, writes } = service({ templates: [template('tpl_1')], connections: connections(3) });
    const missing = await catchDomainError(svc.precheck(incident.id, { variables: {} }));
    expect(missing.code).toBe('missing_variables');
    expect(missing.errors.map((x) => x.field)).toEqual(['variables.eta']);
    const tooLong = await catchDomainError(svc.precheck(incident.id, { variables: { eta: 'x'.repeat(4001) } }));
    expect(tooLong.code).toBe('validation_failed');
    await expect(svc.precheck(incident.id, { variables: { eta: 'soon' } })).resolves.toBeUndefined();
    const unknown = await catchDomainError(svc.precheck('inc_01JABCDEFGHJKMNPQRSTVWXYZ9', { variables: {} }));
    expect(unknown.code).toBe('not_found');
    expect(writes).toEqual([]);
  });

  it('refuses a closed incident', async () => {
    const { svc } = service({
      templates: [],
      connections: connections(1),
      incident: anIncident({ ...incident, status: 'closed' }),
    });
    expect((await catchDomainError(svc.precheck(incident.id, {}))).code).toBe('incident_closed');
  });
});
