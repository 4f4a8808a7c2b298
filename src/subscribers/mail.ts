import { randomBytes } from 'node:crypto';
import Mustache from 'mustache';
import { escapeHtml } from '../channels/common/escape.js';
import { parseMustache, type MustacheToken } from '../domain/template/template-placeholders.js';
import { oneLine } from './mime.js';
import type { SubscriberLocale, SubscriberNotice } from '../ports/subscribers.js';
import { stringsOf, TimeFormat } from '../status/i18n.js';
import type { LocaleStrings } from '../status/locales/en.js';
import {
  alreadySubscribedTemplates,
  confirmMailTemplates,
  mailFrame,
  noticeTemplates,
  type NoticeTemplates,
  type SubscriberTemplateOverrides,
} from './templates.js';

/**
 * The mails subscribers get: a notice (an incident update, correction or retraction, or a
 * maintenance notice), the confirmation of a subscription and the "already subscribed" answer.
 * Rendered with mustache from src/subscribers/templates.ts; the sender adds From, To and the
 * Message-ID (`<ntc id>.<sub id>@herald`, the same on every retry).
 */

export interface SubscriberLinks {
  manage: string;
  unsubscribe: string;
  page: string;
}

export interface RenderedMail {
  /** One line, at most MAX_SUBJECT characters. */
  subject: string;
  text: string;
  html: string;
  headers: Record<string, string>;
}

/** A subject is one header line; past this it is cut (RFC 5322 would fold it, and no reader shows more). */
export const MAX_SUBJECT = 250;

/** The links of a subscriber's mails, under the page's public URL (kept without a trailing slash). */
export function subscriberLinks(publicUrl: string, tokens: { manage: string; unsubscribe: string }): SubscriberLinks {
  const base = publicUrl.replace(/\/+$/, '');
  return {
    manage: `${base}/subscriptions/manage?token=${encodeURIComponent(tokens.manage)}`,
    unsubscribe: `${base}/subscriptions/unsubscribe?token=${encodeURIComponent(tokens.unsubscribe)}`,
    page: base,
  };
}

/** A notice mail for one subscriber: the page's own templates where `overrides` has them, else the built-in ones. */
export function renderNoticeMail(
  n: SubscriberNotice,
  locale: SubscriberLocale,
  links: SubscriberLinks,
  overrides?: SubscriberTemplateOverrides | null,
): RenderedMail {
  const view = noticeView(n, locale, links);
  return {
    ...render(noticeTemplates(locale, overrides), view, locale),
    headers: {
      ...unsubscribeHeaders(links),
      'X-Herald-Notice': oneLine(n.id),
    },
  };
}

/**
 * The notice mail for each subscriber of a locale, rendered once: everything but the subscriber's
 * own links is the same for all of them, so the templates run once with stand-ins for the links
 * and each mail only puts its links in (escaped as the template would have). A page template that
 * puts a link into the subject (cut to a length, folded into one line) renders per subscriber.
 */
export function noticeMailRenderer(
  n: SubscriberNotice,
  locale: SubscriberLocale,
  overrides?: SubscriberTemplateOverrides | null,
): (links: SubscriberLinks) => RenderedMail {
  const once = render(noticeTemplates(locale, overrides), noticeView(n, locale, STAND_INS), locale);
  if (once.subject.includes(STAND_IN_BASE)) return (links) => renderNoticeMail(n, locale, links, overrides);
  const notice = oneLine(n.id);
  return (links) => {
    const put = (escape: Escape) => (_: string, which: keyof SubscriberLinks) => escape(links[which]);
    return {
      subject: once.subject,
      text: once.text.replace(STAND_IN, put(plain)),
      html: once.html.replace(STAND_IN, put(html)),
      headers: { ...unsubscribeHeaders(links), 'X-Herald-Notice': notice },
    };
  };
}

/** Per process, letters and digits only (escaping leaves them alone): no template holds it by chance. */
const STAND_IN_BASE = `hrld${randomBytes(10).toString('hex')}`;
const STAND_INS: SubscriberLinks = {
  manage: `${STAND_IN_BASE}manage`,
  unsubscribe: `${STAND_IN_BASE}unsubscribe`,
  page: `${STAND_IN_BASE}page`,
};
const STAND_IN = new RegExp(`${STAND_IN_BASE}(manage|unsubscribe|page)`, 'g');

/** The mail with the confirmation link (nothing to leave yet: no unsubscribe link or header). */
export function renderConfirmMail(
  page: { title: string; public_url: string },
  locale: SubscriberLocale,
  confirmUrl: string,
): RenderedMail {
  const view = plainView({ page: pageView(page), links: plainView({ page: page.public_url, confirm: confirmUrl }) });
  return { ...render(confirmMailTemplates(locale), view, locale), headers: { ...AUTOMATIC } };
}

/** The answer to a subscribe request for an address already subscribed: its manage and unsubscribe links. */
export function renderAlreadySubscribedMail(
  page: { title: string; public_url: string },
  locale: SubscriberLocale,
  links: SubscriberLinks,
): RenderedMail {
  const view = plainView({ page: pageView(page), links: linksView(links) });
  return { ...render(alreadySubscribedTemplates(locale), view, locale), headers: unsubscribeHeaders(links) };
}

/**
 * Mail no person wrote (RFC 3834), so auto-responders stay quiet; X-Auto-Response-Suppress asks
 * the same of Exchange, whose out-of-office replies ignore Auto-Submitted.
 */
const AUTOMATIC: Readonly<Record<string, string>> = {
  'Auto-Submitted': 'auto-generated',
  'X-Auto-Response-Suppress': 'OOF, AutoReply',
};

/** RFC 2369 and RFC 8058 one-click: mail clients show an "Unsubscribe" button that POSTs to the link. */
function unsubscribeHeaders(links: SubscriberLinks): Record<string, string> {
  return {
    ...AUTOMATIC,
    'List-Unsubscribe': `<${oneLine(links.unsubscribe)}>`,
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
  };
}

// ── the view ────────────────────────────────────────────────────────────────────────────────

/** Objects without a prototype: a name like `constructor` finds nothing in the view. */
function plainView(o: Record<string, unknown>): Record<string, unknown> {
  return Object.assign(Object.create(null) as Record<string, unknown>, o);
}

const pageView = (page: { title: string; public_url: string }) =>
  plainView({ title: page.title, url: page.public_url });
const linksView = (l: SubscriberLinks) => plainView({ manage: l.manage, unsubscribe: l.unsubscribe, page: l.page });

/** Times in UTC (a notice does not carry the page's time zone), worded like the page's. */
const TIME: Record<SubscriberLocale, TimeFormat> = { en: new TimeFormat('en', 'UTC'), de: new TimeFormat('de', 'UTC') };

function timeText(locale: SubscriberLocale, iso: string): string {
  return Number.isNaN(Date.parse(iso)) ? iso : TIME[locale].time(iso).text;
}

/** A label of the page's, or the raw value when the page has no word for it. */
function label(table: Record<string, string>, key: string): string {
  return Object.hasOwn(table, key) ? table[key]! : key;
}

/** The view of a notice mail: exactly the variables templates.ts documents. */
export function noticeView(
  n: SubscriberNotice,
  locale: SubscriberLocale,
  links: SubscriberLinks,
): Record<string, unknown> {
  const s: LocaleStrings = stringsOf(locale);
  const maintenanceKind = n.kind === 'maintenance';
  const i = n.incident;
  const m = n.maintenance;
  return plainView({
    page: pageView(n.page),
    is_update: n.kind === 'incident_update',
    is_correction: n.kind === 'incident_correction',
    is_retraction: n.kind === 'incident_retraction',
    is_maintenance: maintenanceKind,
    incident: i
      ? plainView({
          id: i.id,
          name: i.name,
          status: i.status,
          status_label: label(s.public_state, i.status),
          impact: i.impact,
          impact_label: label(s.impact, i.impact),
          url: i.url,
        })
      : null,
    maintenance: m
      ? plainView({
          id: m.id,
          name: m.name,
          status: m.status,
          status_label: label(s.maintenance_state, m.status),
          scheduled_for: timeText(locale, m.scheduled_for),
          scheduled_until: timeText(locale, m.scheduled_until),
          url: m.url,
        })
      : null,
    update: plainView({
      body: n.update.body,
      status: n.update.status,
      status_label: label(maintenanceKind ? s.maintenance_state : s.public_state, n.update.status),
      created_at: timeText(locale, n.update.created_at),
    }),
    components: n.components.map((c) =>
      plainView({ name: c.name, status: c.status, status_label: label(s.component_status, c.status) }),
    ),
    has_components: n.components.length > 0,
    links: linksView(links),
  });
}

// ── rendering ───────────────────────────────────────────────────────────────────────────────

type Escape = (value: unknown) => string;

const plain: Escape = (value) => String(value);
/** In the HTML part a value is escaped and its line breaks are kept as <br>. */
const html: Escape = (value) => escapeHtml(String(value)).replace(/\r\n|\r|\n/g, '<br>\n');

function render(
  t: NoticeTemplates,
  view: Record<string, unknown>,
  locale: SubscriberLocale,
): Omit<RenderedMail, 'headers'> {
  const f = mailFrame(locale);
  return {
    subject: subjectLine(renderText(t.subject, view, plain)),
    text:
      renderText(f.textHead, view, plain) +
      trimBlankLines(renderText(t.text, view, plain)) +
      renderText(f.textFoot, view, plain),
    html: renderText(f.htmlHead, view, html) + renderText(t.html, view, html) + renderText(f.htmlFoot, view, html),
  };
}

/** Parsed templates: the built-in ones and a page's own are few, and parsing each mail of 100,000 would cost. */
const parsed = new Map<string, MustacheToken[]>();

function tokensOf(text: string): MustacheToken[] {
  let tokens = parsed.get(text);
  if (tokens === undefined) {
    // A page's templates change rarely; a bound keeps edits over months from piling up.
    if (parsed.size >= 64) parsed.clear();
    tokens = rewrite(parseMustache(text));
    parsed.set(text, tokens);
  }
  return tokens;
}

/**
 * Nothing can bypass `escape`, even in a stored template that predates the checks: unescaped
 * placeholders become escaped ones and partials are dropped.
 */
function rewrite(tokens: readonly MustacheToken[]): MustacheToken[] {
  const out: MustacheToken[] = [];
  for (const token of tokens) {
    const [type, value, ...rest] = token;
    if (type === '>') continue;
    if (type === '&') out.push(['name', value, ...rest]);
    else if ((type === '#' || type === '^') && Array.isArray(token[4])) {
      const copy = [...token] as MustacheToken;
      copy[4] = rewrite(token[4] as MustacheToken[]);
      out.push(copy);
    } else out.push(token);
  }
  return out;
}

function renderText(text: string, view: Record<string, unknown>, escape: Escape): string {
  return new Mustache.Writer().renderTokens(
    tokensOf(text) as unknown as string[][],
    new Mustache.Context(view),
    undefined,
    text,
    { escape },
  );
}

function subjectLine(s: string): string {
  const line = oneLine(s);
  if (line.length <= MAX_SUBJECT) return line;
  // Cut in UTF-16 units (what a length check counts), never between the halves of a surrogate pair.
  let cut = line.slice(0, MAX_SUBJECT - 1);
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut.trimEnd()}…`;
}

/** At most one blank line in a row, none at the start or end (sections leave some behind). */
function trimBlankLines(s: string): string {
  return `${s
    .replace(/\r\n/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim()}\n`;
}
