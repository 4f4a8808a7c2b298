import type { App } from '@slack/bolt';
import type { SlackDeps } from '../deps.js';
import { option, SLACK_LIMITS, type PlainTextOption } from '../views/block-kit.js';
import { TEMPLATE_FIELD } from '../views/incident-modals.js';

/**
 * Template options for the search that replaces the static multi-select once there are more
 * templates than Slack's 100 options (block_suggestion, answered in the ack within 3 s).
 * TemplateService.search decides what matches (name contains, case-insensitive, newest first,
 * a bounded read); this only maps the matches to options.
 */
export async function searchTemplates(deps: Pick<SlackDeps, 'services'>, query: string): Promise<PlainTextOption[]> {
  const found = await deps.services.templates.search(query, SLACK_LIMITS.staticOptions);
  return found.map((t) => option(t.name, t.id));
}

export function registerTemplateOptions(app: App, deps: SlackDeps): void {
  app.options<'block_suggestion'>({ type: 'block_suggestion', block_id: TEMPLATE_FIELD }, async ({ options, ack }) => {
    await ack({ options: await searchTemplates(deps, options.value) });
  });
}
