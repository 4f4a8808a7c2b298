import {
  applyAudiencePatch,
  AudienceCreateSchema,
  AudiencePatchSchema,
  newAudience,
  parseAudienceInput,
  type Audience,
} from '../domain/audience/audience.js';
import { iso } from '../domain/common/clock.js';
import {
  checkRevision,
  DomainError,
  keptChanging,
  notFound,
  type ErrorCode,
  type FieldError,
} from '../domain/common/errors.js';
import { isId } from '../domain/common/ids.js';
import { LIMITS } from '../domain/common/limits.js';
import { expectCursorKind, type Page, type PageRequest } from '../domain/common/pagination.js';
import type { AudienceRepo, Clock, IdGenerator } from '../ports/index.js';
import { LOST_RACE, retryOnConflict } from './retry.js';

export interface AudienceServiceDeps {
  repo: AudienceRepo;
  clock: Clock;
  ids: IdGenerator;
  /** Which of these connection ids exist (kept narrow: no connection service needed). */
  connectionsExist(ids: string[]): Promise<boolean[]>;
  /** Which of these template ids exist. */
  templatesExist(ids: string[]): Promise<boolean[]>;
}

/**
 * Audiences (docs/api.md, Audiences): CRUD with the key unique and immutable, references to
 * connections and templates checked at every write (the store checks them again atomically, so
 * a reference deleted meanwhile is reported, never stored), ETag/If-Match on the revision, and a
 * delete refused while an approval for the audience is pending.
 */
export class AudienceService {
  constructor(private readonly d: AudienceServiceDeps) {}

  async create(input: unknown): Promise<Audience> {
    const body = parseAudienceInput(AudienceCreateSchema, input);
    const audience = newAudience(this.d.ids.next('audience'), body, iso(this.d.clock.now()));
    return retryOnConflict(
      async () => {
        await this.assertReferences(audience.connection_ids, audience.template_ids);
        const outcome = await this.d.repo.create(audience);
        if (outcome.ok) return audience;
        if (outcome.reason === 'key_taken') throw keyTaken(audience.key);
        if (outcome.reason === 'too_many') {
          const message = `Herald holds at most ${LIMITS.audiences} audiences; delete one first.`;
          throw new DomainError('validation_failed', message, [{ field: '', code: 'too_many', message }]);
        }
        return LOST_RACE;
      },
      () => keptChanging('audience'),
    );
  }

  async get(id: string): Promise<Audience> {
    const audience = isId('audience', id) ? await this.d.repo.get(id) : null;
    if (!audience) throw notFound('Audience', id);
    return audience;
  }

  /** By key, in order; null where no audience has the key. */
  getByKeys(keys: string[]): Promise<(Audience | null)[]> {
    return this.d.repo.getByKeys(keys);
  }

  /** Every audience, ordered by key (there are at most LIMITS.audiences). */
  all(): Promise<Audience[]> {
    return this.d.repo.all();
  }

  list(page: PageRequest): Promise<Page<Audience>> {
    return this.d.repo.list(expectCursorKind(page, 'after'));
  }

  /**
   * PATCH: fields sent replace (`approval` merges one level: approvers as a whole); `key` is
   * immutable. `ifMatch` is the revision the caller saw; a stale one answers 412.
   */
  async update(id: string, input: unknown, ifMatch: number | null = null): Promise<Audience> {
    return retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('audience', current.rev, ifMatch);
        const patch = parseAudienceInput(AudiencePatchSchema, input);
        const next = applyAudiencePatch(current, patch, iso(this.d.clock.now()));
        if (next === current) return current;
        await this.assertReferences(patch.connection_ids ?? [], patch.template_ids ?? []);
        const outcome = await this.d.repo.update(current, next);
        return outcome.ok ? next : LOST_RACE;
      },
      () => keptChanging('audience'),
    );
  }

  /** DELETE: refused (409 `audience_in_use`, naming them) while approvals for it are pending. */
  async delete(id: string, ifMatch: number | null = null): Promise<void> {
    return retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('audience', current.rev, ifMatch);
        const outcome = await this.d.repo.delete(current);
        if (outcome.ok) return;
        if (outcome.reason === 'in_use') throw inUse(current, outcome.executionIds);
        return LOST_RACE;
      },
      () => keptChanging('audience'),
    );
  }

  /**
   * Every connection and template id must exist: 422 naming each that does not
   * (`connection_ids.3`), `unknown_connection` or `unknown_template` when only one kind is wrong.
   */
  private async assertReferences(connectionIds: string[], templateIds: string[]): Promise<void> {
    const [cons, tpls] = await Promise.all([
      connectionIds.length > 0
        ? this.d.connectionsExist(connectionIds.map((c) => (isId('connection', c) ? c : '')))
        : Promise.resolve([]),
      templateIds.length > 0
        ? this.d.templatesExist(templateIds.map((t) => (isId('template', t) ? t : '')))
        : Promise.resolve([]),
    ]);
    const errors: FieldError[] = [];
    connectionIds.forEach((cid, i) => {
      if (!isId('connection', cid) || !cons[i])
        errors.push({
          field: `connection_ids.${i}`,
          code: 'unknown_connection',
          message: `Connection ${cid} does not exist.`,
        });
    });
    const connectionErrors = errors.length;
    templateIds.forEach((tid, i) => {
      if (!isId('template', tid) || !tpls[i])
        errors.push({
          field: `template_ids.${i}`,
          code: 'unknown_template',
          message: `Template ${tid} does not exist.`,
        });
    });
    if (errors.length === 0) return;
    const templateErrors = errors.length - connectionErrors;
    const code: ErrorCode =
      templateErrors === 0 ? 'unknown_connection' : connectionErrors === 0 ? 'unknown_template' : 'validation_failed';
    throw new DomainError(code, 'Some connection_ids or template_ids do not exist; see errors.', errors);
  }
}

function keyTaken(key: string): DomainError {
  const message = `An audience with the key "${key}" already exists.`;
  return new DomainError('audience_key_taken', message, [{ field: 'key', code: 'audience_key_taken', message }]);
}

function inUse(a: Audience, executionIds: string[]): DomainError {
  const shown = executionIds.slice(0, 10);
  const more = executionIds.length > shown.length ? ` and ${executionIds.length - shown.length} more` : '';
  return new DomainError(
    'audience_in_use',
    `Audience "${a.key}" has approvals pending for ${shown.join(', ')}${more}; approve or reject them (or let them expire) before deleting it.`,
    shown.map((id, i) => ({
      field: `executions.${i}`,
      code: 'audience_in_use',
      message: `Execution ${id} waits for approval to "${a.key}".`,
    })),
  );
}
