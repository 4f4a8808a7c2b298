import { CHANNEL_TYPES, channelOf, type ChannelType } from '../channels/index.js';
import { iso } from '../domain/common/clock.js';
import {
  checkRevision,
  DomainError,
  fieldError,
  isDomainError,
  keptChanging,
  notFound,
  type ErrorCode,
  type FieldError,
} from '../domain/common/errors.js';
import { isId } from '../domain/common/ids.js';
import type { Incident } from '../domain/incident/incident.js';
import { expectCursorKind, type Cursor, type Page, type PageRequest } from '../domain/common/pagination.js';
import { LIMITS } from '../domain/common/limits.js';
import {
  incidentView,
  renderMessage,
  sampleIncident,
  SAMPLE_EXECUTION_ID,
  type RenderContext,
  type RenderedMessage,
} from '../domain/template/render.js';
import {
  applyTemplatePatch,
  newTemplate,
  sourceForChannel,
  TemplateBatchSchema,
  TemplateCreateSchema,
  templateNameKey,
  TemplatePatchSchema,
  TemplateRenderRequestSchema,
  type Template,
} from '../domain/template/template.js';
import { parseInput, safeParseInput, toFieldErrors } from '../domain/common/validation.js';
import { LOST_RACE, retryOnConflict } from './retry.js';
import { missingVariablesError, resolveVariables } from '../domain/template/variables.js';
import type { Clock, IdGenerator, TemplateRepo } from '../ports/index.js';

export interface TemplateServiceDeps {
  templates: TemplateRepo;
  clock: Clock;
  ids: IdGenerator;
  /** Reads an incident for a preview with `incident_id` (kept narrow: no incident service needed). */
  getIncident(id: string): Promise<Incident | null>;
  /** Which of these connection ids exist (kept narrow: no connection service needed). */
  connectionsExist(ids: string[]): Promise<boolean[]>;
  /** HERALD_PUBLIC_URL, the base of `{{incident.url}}`. */
  publicUrl?: string;
}

/** Pages of the catalogue (of LIMITS.pageMax each) one search reads at most. */
export const SEARCH_MAX_PAGES = 20;

export type TemplatePreviews = Record<ChannelType, RenderedMessage>;

export class TemplateService {
  constructor(private readonly d: TemplateServiceDeps) {}

  async create(input: unknown): Promise<Template> {
    const body = parseInput(TemplateCreateSchema, input);
    const template = newTemplate(this.d.ids.next('template'), body, iso(this.d.clock.now()));
    await this.assertConnectionsExist([template], false);
    const outcome = await this.d.templates.create([template]);
    if (outcome.ok) return template;
    if (outcome.reason === 'name_taken') throw nameTaken([{ field: 'name', name: template.name }]);
    throw keptChanging('template');
  }

  /**
   * Bulk create (docs/explanation/delivery-semantics.md): all or nothing, in one atomic write. Every item is judged
   * before anything is refused, so one answer names every bad field of every item, as in `3.name`;
   * names must be unique within the batch as well as against stored templates.
   */
  async createMany(input: unknown): Promise<Template[]> {
    const raw = parseInput(TemplateBatchSchema, input);
    const now = iso(this.d.clock.now());
    const templates: Template[] = [];
    const failures: { code: ErrorCode; errors: FieldError[] }[] = [];
    const firstByName = new Map<string, number>();
    raw.forEach((rawItem, i) => {
      const parsed = safeParseInput(TemplateCreateSchema, rawItem);
      if (!parsed.success) {
        failures.push({ code: 'validation_failed', errors: toFieldErrors(parsed.error.issues, [i]) });
        return;
      }
      const item = parsed.data;
      const key = templateNameKey(item.name);
      const first = firstByName.get(key);
      if (first === undefined) firstByName.set(key, i);
      else {
        const message = `Template ${first} in this batch already has the name "${item.name}".`;
        failures.push({ code: 'validation_failed', errors: [{ field: `${i}.name`, code: 'duplicate_name', message }] });
      }
      try {
        templates.push(newTemplate(this.d.ids.next('template'), item, now));
      } catch (e) {
        if (!isDomainError(e)) throw e;
        failures.push({
          code: e.code,
          errors: e.errors.map((f) => ({ ...f, field: f.field === '' ? String(i) : `${i}.${f.field}` })),
        });
      }
    });
    if (failures.length > 0) {
      const codes = new Set(failures.map((f) => f.code));
      const [only] = codes;
      const code: ErrorCode = codes.size === 1 && only ? only : 'validation_failed';
      throw new DomainError(
        code,
        'Some templates in the batch are invalid; nothing was created. See errors.',
        failures.flatMap((f) => f.errors),
      );
    }
    await this.assertConnectionsExist(templates, true);
    const outcome = await this.d.templates.create(templates);
    if (outcome.ok) return templates;
    if (outcome.reason === 'name_taken') {
      throw nameTaken(outcome.indexes.map((i) => ({ field: `${i}.name`, name: templates[i]?.name ?? '' })));
    }
    throw keptChanging('template');
  }

  async get(id: string): Promise<Template> {
    const template = isId('template', id) ? await this.d.templates.get(id) : null;
    if (!template) throw notFound('Template', id);
    return template;
  }

  /** Templates by id, null where one does not exist (execute tolerates stale references). */
  getMany(ids: string[]): Promise<(Template | null)[]> {
    return Promise.all(ids.map((id) => (isId('template', id) ? this.d.templates.get(id) : Promise.resolve(null))));
  }

  list(page: PageRequest): Promise<Page<Template>> {
    return this.d.templates.list(expectCursorKind(page, 'after'));
  }

  /**
   * Templates whose name contains `query` (case-insensitive, trimmed; empty matches every one),
   * newest first, at most `limit`. The search reads at most SEARCH_MAX_PAGES pages of the
   * catalogue, so it stays fast (a Slack options request is answered within 3 s) however large
   * the catalogue is; matches beyond that are not found.
   */
  async search(query: string, limit: number): Promise<Template[]> {
    const needle = query.trim().toLowerCase();
    const max = Math.max(0, Math.floor(limit));
    const found: Template[] = [];
    let cursor: Cursor | null = null;
    for (let page = 0; page < SEARCH_MAX_PAGES && found.length < max; page++) {
      const p: Page<Template> = await this.d.templates.list({ limit: LIMITS.pageMax, cursor });
      for (const t of p.data) {
        if (needle === '' || t.name.toLowerCase().includes(needle)) found.push(t);
        if (found.length === max) break;
      }
      if (p.nextCursor === null) break;
      cursor = p.nextCursor;
    }
    return found;
  }

  /**
   * PATCH: a new version (old ones stay readable). `ifMatch` is the version the caller saw (from
   * the ETag); a stale one answers 412 instead of overwriting someone else's edit.
   */
  async update(id: string, input: unknown, ifMatch: number | null = null): Promise<Template> {
    return retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('template', current.version, ifMatch);
        const patch = parseInput(TemplatePatchSchema, input);
        const next = applyTemplatePatch(current, patch, iso(this.d.clock.now()));
        if (next === current) return current;
        if (patch.connection_ids) await this.assertConnectionsExist([next], false);
        const outcome = await this.d.templates.update(current, next);
        if (outcome.ok) return next;
        if (outcome.reason === 'name_taken') throw nameTaken([{ field: 'name', name: next.name }]);
        return LOST_RACE;
      },
      () => keptChanging('template'),
    );
  }

  /** DELETE: refused (409 `template_in_use`) while a non-closed incident attaches the template. */
  async delete(id: string, ifMatch: number | null = null): Promise<void> {
    return retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('template', current.version, ifMatch);
        const outcome = await this.d.templates.delete(current);
        if (outcome.ok) return;
        if (outcome.reason === 'in_use') {
          throw new DomainError(
            'template_in_use',
            `Template ${id} is attached to an incident that is not closed; detach it or close the incident first.`,
          );
        }
        return LOST_RACE;
      },
      () => keptChanging('template'),
    );
  }

  async versions(id: string, page: PageRequest): Promise<Page<Template>> {
    const current = await this.get(id);
    return this.d.templates.listVersions(id, current.version, expectCursorKind(page, 'offset'));
  }

  /** One version of a template, or null when it (or the template) no longer exists. */
  getVersionOrNull(id: string, version: number): Promise<Template | null> {
    return this.d.templates.getVersion(id, version);
  }

  /** One version; `raw` is the path segment, and anything but an existing version number is 404. */
  async version(id: string, raw: string): Promise<Template> {
    await this.get(id);
    const n = /^[1-9]\d{0,8}$/.test(raw) ? Number(raw) : null;
    const found = n === null ? null : await this.d.templates.getVersion(id, n);
    if (!found) throw new DomainError('not_found', `Template ${id} has no version ${raw}.`);
    return found;
  }

  /**
   * The render preview (docs/explanation/delivery-semantics.md): the current version for every channel type, with the
   * caller's variables (defaults applied) and the built-ins of `incident_id` or a sample incident.
   * Nothing is sent. Variables the template does not use are ignored, as at execute.
   */
  async render(id: string, input: unknown): Promise<TemplatePreviews> {
    const template = await this.get(id);
    const req = parseInput(TemplateRenderRequestSchema, input ?? {});
    let incident = sampleIncident(this.d.publicUrl);
    if (req.incident_id !== undefined && req.incident_id !== null) {
      const found = isId('incident', req.incident_id) ? await this.d.getIncident(req.incident_id) : null;
      if (!found)
        throw fieldError(
          'validation_failed',
          'incident_id',
          `Incident ${req.incident_id} does not exist.`,
          'not_found',
        );
      incident = incidentView(found, this.d.publicUrl);
    }
    const { values, missing } = resolveVariables(template.variables, req.variables);
    if (missing.length > 0) throw missingVariablesError(missing);
    const ctx: RenderContext = { incident, execution: { id: SAMPLE_EXECUTION_ID }, variables: values };
    const previews = {} as TemplatePreviews;
    for (const type of CHANNEL_TYPES)
      previews[type] = renderMessage(sourceForChannel(template, type), ctx, channelOf(type).format(null));
    return previews;
  }

  /** `bulk` prefixes each error with the item's index (`3.connection_ids.0`). */
  private async assertConnectionsExist(templates: Template[], bulk: boolean): Promise<void> {
    const all = templates.flatMap((t) => t.connection_ids);
    if (all.length === 0) return;
    const exist = await this.d.connectionsExist(all);
    const errors: FieldError[] = [];
    let k = 0;
    templates.forEach((t, i) => {
      const prefix = bulk ? `${i}.` : '';
      t.connection_ids.forEach((cid, j) => {
        if (!exist[k++])
          errors.push({
            field: `${prefix}connection_ids.${j}`,
            code: 'unknown_connection',
            message: `Connection ${cid} does not exist.`,
          });
      });
    });
    if (errors.length > 0) throw new DomainError('unknown_connection', 'Some connection_ids do not exist.', errors);
  }
}

function nameTaken(items: { field: string; name: string }[]): DomainError {
  return new DomainError(
    'template_name_taken',
    items.length === 1
      ? `A template named "${items[0]?.name}" already exists.`
      : 'Some template names are already taken; nothing was created.',
    items.map(({ field, name }) => ({
      field,
      code: 'template_name_taken',
      message: `A template named "${name}" already exists.`,
    })),
  );
}
