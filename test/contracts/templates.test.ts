import { describe, expect, it } from 'vitest';
import { newIncident } from '../../src/domain/incident/incident.js';
import { newTemplate, TemplateCreateSchema, type Template } from '../../src/domain/template/template.js';
import type { TemplateRepo } from '../../src/ports/index.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { RedisTemplateRepo } from '../../src/store/templates.js';
import { InMemoryTemplateRepo } from '../service/fakes.js';
import { allPages, contractRedis, ids, plain } from './support.js';

/** The template repository's contract, as TemplateService and IncidentService rely on it. */
const db = contractRedis('c-tpl');

interface Store {
  repo: TemplateRepo;
  /** Makes a non-closed incident attach the template, the way production does. */
  attach: (templateId: string) => Promise<void>;
}

const NOW = '2026-11-22T10:00:00.000Z';
const template = (name: string): Template =>
  newTemplate(ids.next('template'), TemplateCreateSchema.parse({ name, body: 'The {{service}} is down.' }), NOW);

/** The next version, as applyTemplatePatch makes one. */
const revised = (t: Template, over: Partial<Template> = {}): Template => ({
  ...t,
  body: `${t.body} (v${t.version + 1})`,
  version: t.version + 1,
  ...over,
});

function contract(make: () => Store) {
  it('creates a batch all or none, refusing names already taken (case-insensitively), by index', async () => {
    const { repo } = make();
    const a = template('Outage');
    expect(await repo.create([a])).toEqual({ ok: true });
    expect(plain(await repo.get(a.id))).toEqual(a);
    const b = template('Maintenance');
    const clash = template('OUTAGE');
    expect(await repo.create([b, clash])).toEqual({ ok: false, reason: 'name_taken', indexes: [1] });
    expect(await repo.get(b.id)).toBeNull();
    expect(await repo.get(ids.next('template'))).toBeNull();
  });

  it('updates by compare-and-set, keeping every version readable; a rename must find its name free', async () => {
    const { repo } = make();
    const a = template('Outage');
    const other = template('Degraded');
    await repo.create([a, other]);
    const v2 = revised(a);
    expect(await repo.update(a, v2)).toEqual({ ok: true });
    expect(await repo.update(a, revised(a, { name: 'Stale' }))).toEqual({ ok: false, reason: 'conflict' });
    expect(await repo.update(v2, revised(v2, { name: 'degraded' }))).toEqual({
      ok: false,
      reason: 'name_taken',
      indexes: [0],
    });
    // Its own name in another case is not taken.
    const v3 = revised(v2, { name: 'OUTAGE' });
    expect(await repo.update(v2, v3)).toEqual({ ok: true });
    expect(plain(await repo.get(a.id))).toEqual(v3);
    expect(plain(await repo.getVersion(a.id, 1))).toEqual(a);
    expect(plain(await repo.getVersion(a.id, 2))).toEqual(v2);
    expect(await repo.getVersion(a.id, 4)).toBeNull();
    // After a rename, the old name is free again.
    expect(await repo.update(v3, revised(v3, { name: 'Major outage' }))).toEqual({ ok: true });
    expect(await repo.create([template('outage')])).toEqual({ ok: true });
  });

  it('pages the versions newest first; one written between pages neither repeats nor skips one', async () => {
    const { repo } = make();
    let t = template('Outage');
    await repo.create([t]);
    for (let n = 0; n < 4; n++) {
      const next = revised(t);
      expect(await repo.update(t, next)).toEqual({ ok: true });
      t = next;
    }
    const all = await allPages((p) => repo.listVersions(t.id, t.version, p), 2);
    expect(all.map((p) => p.map((v) => v.version))).toEqual([[5, 4], [3, 2], [1]]);
    const first = await repo.listVersions(t.id, t.version, { limit: 2, cursor: null });
    const v6 = revised(t);
    expect(await repo.update(t, v6)).toEqual({ ok: true });
    const second = await repo.listVersions(t.id, v6.version, { limit: 2, cursor: first.nextCursor });
    expect([...first.data, ...second.data].map((v) => v.version)).toEqual([5, 4, 3, 2]);
  });

  it('deletes by compare-and-set with every version, unless a non-closed incident attaches it', async () => {
    const { repo, attach } = make();
    const a = template('Outage');
    const used = template('Used');
    await repo.create([a, used]);
    const v2 = revised(a);
    await repo.update(a, v2);
    expect(await repo.delete(a)).toEqual({ ok: false, reason: 'conflict' });
    expect(await repo.delete(v2)).toEqual({ ok: true });
    expect(await repo.get(a.id)).toBeNull();
    expect(await repo.getVersion(a.id, 1)).toBeNull();
    expect(await repo.delete(v2)).toEqual({ ok: false, reason: 'conflict' });
    await attach(used.id);
    expect(await repo.delete(used)).toEqual({ ok: false, reason: 'in_use' });
    expect(plain(await repo.get(used.id))).toEqual(used);
  });

  it('lists newest first and pages through every template once', async () => {
    const { repo } = make();
    const made: Template[] = [];
    for (let n = 0; n < 3; n++) made.push(template(`T${n}`));
    await repo.create(made);
    made.push(template('Later'));
    await repo.create(made.slice(3));
    const pages = await allPages((p) => repo.list(p), 3);
    expect(pages.map((p) => p.length)).toEqual([3, 1]);
    expect(pages.flat().map((t) => t.id)).toEqual(made.map((t) => t.id).reverse());
  });
}

describe.each<[string, () => Store]>([
  [
    'in-memory',
    () => {
      const repo = new InMemoryTemplateRepo();
      return { repo, attach: (id) => Promise.resolve(void repo.inUse.add(id)) };
    },
  ],
  [
    'redis',
    () => {
      const keys = db.keys();
      const incidents = new RedisIncidentRepo(db.redis(), keys);
      return {
        repo: new RedisTemplateRepo(db.redis(), keys),
        attach: async (id: string) => {
          const i = newIncident(
            ids.next('incident'),
            { title: 'Uses it', severity: 'minor', description: '', impact: '', template_ids: [id] },
            { type: 'system', id: 'c', name: 'c' },
            NOW,
          );
          expect(await incidents.create(i, [])).toBe(true);
        },
      };
    },
  ],
])('TemplateRepo contract: %s', (_name, make) => contract(make));
