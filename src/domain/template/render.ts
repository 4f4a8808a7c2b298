import Mustache from 'mustache';
import type { MessageFormat } from '../../contracts/channel.js';
import { escapeHtml } from '../../channels/common/escape.js';
import type { Incident } from '../incident/incident.js';
import { parseMustache, type MustacheToken } from './template-placeholders.js';
import { RESERVED_VARIABLE_NAMES } from './variables.js';
import { formatDueTime } from '../execution/conversation.js';

/**
 * Renders a message for one channel type: Mustache with the channel's escape function, so every
 * VALUE (`{{incident.title}}`, `{{eta}}`) is escaped for the target while the template's literal
 * text is kept as its author wrote it. Used by the render preview and by execute.
 */

/** What is rendered: a template's text for one channel (see `sourceForChannel`). */
export interface MessageSource {
  subject: string;
  body: string;
}

/** The `{{incident.*}}` built-ins. */
export interface IncidentView {
  id: string;
  title: string;
  severity: string;
  status: string;
  description: string;
  impact: string;
  resolution_summary: string | null;
  url: string;
  /** When the next update is due, `14:30 UTC` ("" when none is set). */
  next_update_at: string;
}

export interface RenderContext {
  incident: IncidentView;
  /** `note`: a correction's note or a retraction's reason, for Herald's own correction texts (not a template built-in).
   * */
  execution: { id: string; note?: string };
  /** Final values (defaults already applied, see resolveVariables). */
  variables: Readonly<Record<string, string>>;
}

export interface RenderedMessage {
  /** One line: line breaks in a rendered subject become spaces. */
  subject: string;
  body: string;
  /** E-mail only: the HTML alternative (`body` is then the text part). */
  html?: string;
}

type Escape = (value: unknown) => string;

const plain: Escape = (v) => String(v);

/** Renders for one channel, in the format its module declares (`channelOf(type).format(config)`). */
export function renderMessage(source: MessageSource, ctx: RenderContext, format: MessageFormat): RenderedMessage {
  const view = buildView(ctx);
  if (format.html) {
    // The subject and text part are plain text; the HTML part escapes values and literal text alike.
    return {
      subject: oneLine(renderText(source.subject, view, plain)),
      body: renderText(source.body, view, plain),
      html: renderText(source.body, view, (v) => htmlLines(String(v)), htmlLines),
    };
  }
  const escape: Escape = (v) => format.escape(String(v));
  return { subject: oneLine(renderText(source.subject, view, escape)), body: renderText(source.body, view, escape) };
}

const htmlLines = (s: string): string => escapeHtml(s).replace(/\r?\n/g, '<br>\n');

const oneLine = (s: string): string => s.replace(/\s*[\r\n]+\s*/g, ' ').trim();

/**
 * Renders one text. Tokens are rewritten first so nothing can bypass `escape` even in text that
 * never went through validation: unescaped placeholders become escaped ones and partials are
 * dropped; `literal`, when given, transforms the template's own text (the e-mail HTML part).
 */
function renderText(
  text: string,
  view: Record<string, unknown>,
  escape: Escape,
  literal?: (s: string) => string,
): string {
  const tokens = rewrite(parseMustache(text), literal);
  return new Mustache.Writer().renderTokens(
    tokens as unknown as string[][],
    new Mustache.Context(view),
    undefined,
    text,
    { escape },
  );
}

function rewrite(tokens: readonly MustacheToken[], literal: ((s: string) => string) | undefined): MustacheToken[] {
  const out: MustacheToken[] = [];
  for (const token of tokens) {
    const [type, value, ...rest] = token;
    if (type === '>') continue;
    if (type === '&') out.push(['name', value, ...rest]);
    else if (type === 'text' && literal) out.push(['text', literal(value), ...rest]);
    else if ((type === '#' || type === '^') && Array.isArray(token[4])) {
      const copy = [...token] as MustacheToken;
      copy[4] = rewrite(token[4] as MustacheToken[], literal);
      out.push(copy);
    } else out.push(token);
  }
  return out;
}

/**
 * The Mustache view. Objects have no prototype so `{{constructor}}` finds nothing, caller
 * variables cannot shadow the built-ins, and `variable-list` (not a valid variable name, so no
 * template can collide with it) lists the supplied values for the default message.
 */
function buildView(ctx: RenderContext): Record<string, unknown> {
  const view = Object.create(null) as Record<string, unknown>;
  const list: Record<string, string>[] = [];
  for (const [name, value] of Object.entries(ctx.variables).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (RESERVED_VARIABLE_NAMES.has(name)) continue;
    view[name] = value;
    if (value.trim() !== '') list.push(Object.assign(Object.create(null) as Record<string, string>, { name, value }));
  }
  view.incident = Object.assign(Object.create(null) as Record<string, unknown>, ctx.incident);
  view.execution = Object.assign(
    Object.create(null) as Record<string, unknown>,
    { id: ctx.execution.id },
    ctx.execution.note !== undefined ? { note: ctx.execution.note } : {},
  );
  view['variable-list'] = list;
  return view;
}

/** The incident's API URL under HERALD_PUBLIC_URL, or null when that is unset (`{{incident.url}}` renders ""). */
export function incidentUrl(publicUrl: string | null | undefined, incidentId: string): string | null {
  return publicUrl ? `${publicUrl.replace(/\/+$/, '')}/v1/incidents/${incidentId}` : null;
}

export function incidentView(
  incident: Pick<Incident, 'id' | 'title' | 'severity' | 'status' | 'description' | 'impact' | 'resolution_summary'> & {
    next_update_due_at?: string | null;
  },
  publicUrl?: string,
  now: Date = new Date(),
): IncidentView {
  return {
    next_update_at: incident.next_update_due_at ? formatDueTime(incident.next_update_due_at, now) : '',
    id: incident.id,
    title: incident.title,
    severity: incident.severity,
    status: incident.status,
    description: incident.description,
    impact: incident.impact,
    resolution_summary: incident.resolution_summary,
    url: incidentUrl(publicUrl, incident.id) ?? '',
  };
}

/** The execution id shown in previews, where nothing is executed. */
export const SAMPLE_EXECUTION_ID = 'exe_00000000000000000000000000';

/** Built-ins for a preview without `incident_id`. */
export function sampleIncident(publicUrl?: string): IncidentView {
  return incidentView(
    {
      id: 'inc_00000000000000000000000000',
      title: 'Checkout errors for some EU customers',
      severity: 'major',
      status: 'investigating',
      description: 'Card payments fail intermittently for customers routed through the EU region.',
      impact: 'About 1 in 5 EU checkouts fails; customers can retry.',
      resolution_summary: null,
    },
    publicUrl ?? 'https://herald.example.com',
  );
}

/**
 * The built-in message of a channel the public reads (the status page): the title, and the
 * impact when one is written. Nothing internal: no severity, description, variables or Herald's
 * own incident link. A template (with a status_page variant) says more.
 */
export function publicMessageSource(): MessageSource {
  return {
    subject: '{{incident.title}}',
    body: '{{#incident.impact}}{{incident.impact}}{{/incident.impact}}{{^incident.impact}}{{incident.title}}{{/incident.impact}}',
  };
}

/**
 * The message an incident without templates sends (docs/explanation/delivery-semantics.md): title, severity, status,
 * impact, description and every supplied variable. Channel escaping applies as for any template.
 */
export function defaultMessageSource(): MessageSource {
  return {
    subject: '[{{incident.severity}}] {{incident.title}}',
    body: [
      '{{incident.title}}',
      'Severity: {{incident.severity}} | Status: {{incident.status}}',
      '{{#incident.impact}}',
      'Impact: {{incident.impact}}',
      '{{/incident.impact}}',
      '{{#incident.description}}',
      '',
      '{{incident.description}}',
      '{{/incident.description}}',
      '{{#variable-list.length}}',
      '',
      '{{/variable-list.length}}',
      '{{#variable-list}}',
      '{{name}}: {{value}}',
      '{{/variable-list}}',
      '{{#incident.url}}',
      '',
      '{{incident.url}}',
      '{{/incident.url}}',
    ].join('\n'),
  };
}
