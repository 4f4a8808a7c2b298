import type { RedisClient as Redis } from './redis-connect.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import { templateNameKey, type Template } from '../domain/template/template.js';
import type { TemplateRepo, TemplateWriteOutcome } from '../ports/index.js';
import { Change } from './commit.js';
import { loadJson, pageFiltered } from './index-page.js';
import type { Keys } from './keys.js';

/**
 * Templates as JSON strings, with:
 * - `tpl:<id>:versions`, a hash version → the template's JSON at that version (every version,
 *   the current one included, so old versions stay readable after a PATCH);
 * - `tpl-names`, a hash of the case-folded name → id: uniqueness is checked and claimed in the
 *   same atomic Change as the write (HGET must be empty), so two concurrent creates of one name
 *   cannot both succeed;
 * - `tpls`, the score-0 sorted set paged BYLEX, newest first;
 * - `tpl:<id>:incs` (kept by the incident store): non-closed incidents attaching the template,
 *   which must be empty at the moment of a delete.
 * Records are compared as the exact JSON string read, which is the compare-and-set of updates.
 */
export class RedisTemplateRepo implements TemplateRepo {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async get(id: string): Promise<Template | null> {
    const [one] = await loadJson<Template>(this.redis, [this.keys.template(id)]);
    return one ?? null;
  }

  async create(templates: Template[]): Promise<TemplateWriteOutcome> {
    const k = this.keys;
    const change = new Change(this.redis);
    const nameKeys = templates.map((t) => templateNameKey(t.name));
    templates.forEach((t, i) => {
      const json = JSON.stringify(t);
      const nameKey = nameKeys[i] ?? '';
      change
        .expect(k.template(t.id), null)
        .expectHashField(k.templateNames(), nameKey, null)
        .write('SET', k.template(t.id), json)
        .write('HSET', k.templateVersions(t.id), String(t.version), json)
        .write('HSET', k.templateNames(), nameKey, t.id)
        .write('ZADD', k.templates(), '0', t.id);
    });
    if (await change.commit({ kind: 'templates', templates })) return { ok: true };
    const holders = nameKeys.length > 0 ? await this.redis.hmget(k.templateNames(), ...nameKeys) : [];
    const indexes = holders.flatMap((holder, i) => (holder === null ? [] : [i]));
    return indexes.length > 0 ? { ok: false, reason: 'name_taken', indexes } : { ok: false, reason: 'conflict' };
  }

  async update(prev: Template, next: Template): Promise<TemplateWriteOutcome> {
    const k = this.keys;
    const prevJson = JSON.stringify(prev);
    const json = JSON.stringify(next);
    const change = new Change(this.redis).expect(k.template(prev.id), prevJson);
    const oldName = templateNameKey(prev.name);
    const newName = templateNameKey(next.name);
    if (newName !== oldName) {
      change
        .expectHashField(k.templateNames(), newName, null)
        .write('HDEL', k.templateNames(), oldName)
        .write('HSET', k.templateNames(), newName, next.id);
    }
    change
      .write('SET', k.template(next.id), json)
      .write('HSET', k.templateVersions(next.id), String(next.version), json);
    if (await change.commit()) return { ok: true };
    if ((await this.redis.get(k.template(prev.id))) !== prevJson) return { ok: false, reason: 'conflict' };
    return { ok: false, reason: 'name_taken', indexes: [0] };
  }

  async delete(t: Template): Promise<TemplateWriteOutcome> {
    const k = this.keys;
    const ok = await new Change(this.redis)
      .expect(k.template(t.id), JSON.stringify(t))
      .expectEmptySet(k.templateIncidents(t.id))
      .write('DEL', k.template(t.id))
      .write('DEL', k.templateVersions(t.id))
      .write('DEL', k.templateIncidents(t.id))
      .write('HDEL', k.templateNames(), templateNameKey(t.name))
      .write('ZREM', k.templates(), t.id)
      .commit();
    if (ok) return { ok: true };
    if ((await this.redis.scard(k.templateIncidents(t.id))) > 0) return { ok: false, reason: 'in_use' };
    return { ok: false, reason: 'conflict' };
  }

  list(page: PageRequest): Promise<Page<Template>> {
    // A template deleted between reading the index and the record is skipped, not a hole.
    return pageFiltered(
      this.redis,
      [this.keys.templates()],
      page,
      (ids) =>
        loadJson<Template>(
          this.redis,
          ids.map((id) => this.keys.template(id)),
        ),
      () => true,
    );
  }

  async getVersion(id: string, version: number): Promise<Template | null> {
    const raw = await this.redis.hget(this.keys.templateVersions(id), String(version));
    return raw === null ? null : (JSON.parse(raw) as Template);
  }

  /**
   * Versions only ever grow by one at the top, so the cursor is the last version served (as an
   * offset cursor) and the next page starts just below it: new versions never shift a page.
   */
  async listVersions(id: string, latest: number, page: PageRequest): Promise<Page<Template>> {
    const below = page.cursor && 'offset' in page.cursor ? page.cursor.offset : latest + 1;
    const numbers: number[] = [];
    for (let n = Math.min(below - 1, latest); n >= 1 && numbers.length < page.limit; n--) numbers.push(n);
    const raw =
      numbers.length > 0 ? await this.redis.hmget(this.keys.templateVersions(id), ...numbers.map(String)) : [];
    const data = raw.flatMap((r) => (r === null ? [] : [JSON.parse(r) as Template]));
    const last = numbers[numbers.length - 1];
    return { data, nextCursor: last !== undefined && last > 1 ? { offset: last } : null };
  }
}
