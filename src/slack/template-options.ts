import type { App } from '@slack/bolt';
import { LIMITS } from '../domain/limits.js';
import type { Cursor, Page } from '../domain/pagination.js';
import type { Template } from '../domain/template.js';
import type { SlackDeps } from './deps.js';
import { option, SLACK_LIMITS, type PlainTextOption } from './views/block-kit.js';
import { TEMPLATE_FIELD } from './views/incident-modals.js';

/**
 * Template options for the search that replaces the static multi-select once there are more
 * templates than Slack's 100 options (block_suggestion, answered in the ack within 3 s). Matches
 * are by name, case-insensitive, newest first; an empty query lists the newest 100.
 */

/** Pages of 100 read at most per search: a large catalogue stays searchable, the ack stays fast. */
const MAX_PAGES = 20;

export async function searchTemplates(deps: Pick<SlackDeps, 'services'>, query: string): Promise<PlainTextOption[]> {
  const needle = query.trim().toLowerCase();
  const found: PlainTextOption[] = [];
  let cursor: Cursor | null = null;
  for (let page = 0; page < MAX_PAGES && found.length < SLACK_LIMITS.staticOptions; page++) {
    const p: Page<Template> = await deps.services.templates.list({ limit: LIMITS.pageMax, cursor });
    for (const t of p.data) {
      if (needle === '' || t.name.toLowerCase().includes(needle)) found.push(option(t.name, t.id));
      if (found.length === SLACK_LIMITS.staticOptions) break;
    }
    if (p.nextCursor === null) break;
    cursor = p.nextCursor;
  }
  return found;
}

export function registerTemplateOptions(app: App, deps: SlackDeps): void {
  app.options<'block_suggestion'>({ type: 'block_suggestion', block_id: TEMPLATE_FIELD }, async ({ options, ack }) => {
    await ack({ options: await searchTemplates(deps, options.value) });
  });
}
