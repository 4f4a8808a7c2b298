import { z } from 'zod';
import { escapeHtml } from '../channels/common/escape.js';
import { parseMustache, type MustacheToken } from '../domain/template/template-placeholders.js';
import type { SubscriberLocale } from '../ports/subscribers.js';
import { fill, stringsOf } from '../status/i18n.js';

/**
 * What subscribers read in their mail: the built-in mustache templates per locale, the variables
 * a template may use, and the check of a page's own templates (the status_page connection's
 * `subscriber_templates`). Rendering is src/subscribers/mail.ts.
 *
 * A notice mail has three parts: `subject`, `text` (the plain-text part) and `html` (the content
 * of the HTML part: a fragment, which the mail wraps in its document). The header line with the
 * page's title and the footer with the manage and unsubscribe links are added around either body
 * by the mail itself and cannot be overridden, so no template can leave a subscriber without a
 * way out. The subject, the text part and the HTML part each get the same variables; in the HTML
 * part every value is HTML-escaped (line breaks become <br>), in the others it is printed as is.
 * `{{{x}}}`, `{{&x}}` and partials are refused: they would bypass that escaping.
 *
 * The variables (NOTICE_TEMPLATE_VARIABLES lists them with a description each):
 * - `page.title`, `page.url`;
 * - the kind, one of them true: `is_update`, `is_correction`, `is_retraction`, `is_maintenance`;
 * - `incident` (absent for maintenance): `.id`, `.name`, `.status`, `.status_label`, `.impact`,
 *   `.impact_label`, `.url`;
 * - `maintenance` (absent for incidents): `.id`, `.name`, `.status`, `.status_label`,
 *   `.scheduled_for`, `.scheduled_until` (formatted), `.url`;
 * - `update`: `.body`, `.status`, `.status_label`, `.created_at` (formatted);
 * - `components` (a list: `name`, `status`, `status_label`), `has_components`;
 * - `links.manage`, `links.unsubscribe`, `links.page`.
 * Status labels are the page's own words (src/status/locales/); times are shown in UTC in the
 * subscriber's locale, as the page's TimeFormat writes them ("Nov 27, 2026, 9:14 PM UTC").
 */

/** The longest text of one part a page's template may have. */
export const MAX_TEMPLATE_CHARS = 20_000;

export type SubscriberTemplatePart = 'subject' | 'text' | 'html';
export const SUBSCRIBER_TEMPLATE_PARTS: readonly SubscriberTemplatePart[] = ['subject', 'text', 'html'];

/** The locales a page's templates may be given for (the page's own: src/status/locales/). */
export const SUBSCRIBER_TEMPLATE_LOCALES = ['en', 'de'] as const satisfies readonly SubscriberLocale[];

export type SubscriberTemplateOverrides = Partial<
  Record<SubscriberLocale, { subject?: string; text?: string; html?: string }>
>;

export interface NoticeTemplates {
  subject: string;
  text: string;
  html: string;
}

// ── the variables ───────────────────────────────────────────────────────────────────────────

type VarNode =
  | { t: 'value'; d: string }
  | { t: 'object'; d: string; fields: Record<string, VarNode> }
  | { t: 'list'; d: string; item: Record<string, VarNode> };

const v = (d: string): VarNode => ({ t: 'value', d });
const obj = (d: string, fields: Record<string, VarNode>): VarNode => ({ t: 'object', d, fields });

/** Every variable of a notice mail's view (mail.ts builds exactly this shape). */
const NOTICE_VARIABLE_TREE: Record<string, VarNode> = {
  page: obj('The status page.', {
    title: v("The page's title."),
    url: v("The page's address (its public_url)."),
  }),
  is_update: v('True for a new incident update.'),
  is_correction: v('True when a published incident update was corrected (update.body holds the new words).'),
  is_retraction: v('True when a published incident update was withdrawn.'),
  is_maintenance: v('True for a maintenance notice (scheduled, reminder, state change or update).'),
  incident: obj('The incident (absent for maintenance: use it as a section).', {
    id: v("The incident's id."),
    name: v("The incident's name."),
    status: v("The incident's state: investigating, identified, monitoring or resolved."),
    status_label: v('The incident\'s state in the page\'s words ("Identified").'),
    impact: v("The incident's impact: none, minor, major or critical."),
    impact_label: v('The impact in the page\'s words ("Major impact").'),
    url: v("The incident's page."),
  }),
  maintenance: obj('The maintenance (absent for incidents: use it as a section).', {
    id: v("The maintenance's id."),
    name: v("The maintenance's name."),
    status: v("The maintenance's state: scheduled, in_progress, verifying or completed."),
    status_label: v('The state in the page\'s words ("In progress").'),
    scheduled_for: v('When it is to start, formatted in UTC.'),
    scheduled_until: v('When it is to end, formatted in UTC.'),
    url: v("The maintenance's page."),
  }),
  update: obj('The update the notice is about (for a retraction: the one withdrawn).', {
    body: v("The update's words."),
    status: v("The update's state (an incident's or a maintenance's)."),
    status_label: v("The update's state in the page's words."),
    created_at: v('When it was first published, formatted in UTC.'),
  }),
  components: {
    t: 'list',
    d: 'The components the notice names (a section repeated per component).',
    item: {
      name: v("The component's name."),
      status: v("The component's status (operational, degraded_performance, …)."),
      status_label: v('The status in the page\'s words ("Partial outage").'),
    },
  },
  has_components: v('True when the notice names at least one component.'),
  links: obj("The subscriber's links.", {
    manage: v('Where the subscriber chooses components and language, or leaves.'),
    unsubscribe: v('Where the subscriber leaves with one click.'),
    page: v('The status page.'),
  }),
};

/** A variable a page's template may use: `name` as written in `{{…}}` (`components[].name` inside `{{#components}}`). */
export interface TemplateVariableDoc {
  name: string;
  description: string;
}

function flatten(tree: Record<string, VarNode>, prefix: string): TemplateVariableDoc[] {
  const out: TemplateVariableDoc[] = [];
  for (const [key, node] of Object.entries(tree)) {
    const name = `${prefix}${key}`;
    out.push({ name, description: node.d });
    if (node.t === 'object') out.push(...flatten(node.fields, `${name}.`));
    if (node.t === 'list') out.push(...flatten(node.item, `${name}[].`));
  }
  return out;
}

/** The variables of a notice mail's templates, with what each holds (for docs and error messages). */
export const NOTICE_TEMPLATE_VARIABLES: readonly TemplateVariableDoc[] = flatten(NOTICE_VARIABLE_TREE, '');

// ── the check of a page's templates ─────────────────────────────────────────────────────────

/** Scopes mustache looks names up in, innermost last (a section pushes one). */
type Scope = Record<string, VarNode>;

/** What a `{{name}}` refers to: mustache looks its first segment up from the innermost scope out. */
function resolve(name: string, scopes: readonly Scope[]): VarNode | null {
  const [head = '', ...rest] = name.split('.');
  for (let i = scopes.length - 1; i >= 0; i--) {
    let node: VarNode | undefined = Object.hasOwn(scopes[i]!, head) ? scopes[i]![head] : undefined;
    if (node === undefined) continue;
    for (const seg of rest) {
      node = node.t === 'object' && Object.hasOwn(node.fields, seg) ? node.fields[seg] : undefined;
      if (node === undefined) return null;
    }
    return node;
  }
  return null;
}

/** What a `{{#name}}` section makes visible inside it. */
function scopeOf(node: VarNode): Scope {
  if (node.t === 'object') return node.fields;
  if (node.t === 'list') return node.item;
  return {};
}

const VARIABLE_NAMES = NOTICE_TEMPLATE_VARIABLES.map((x) => x.name).join(', ');

function walk(tokens: readonly MustacheToken[], scopes: readonly Scope[], inSection: boolean, out: string[]): void {
  for (const token of tokens) {
    const [type, name] = token;
    switch (type) {
      case '&':
        out.push(`{{{${name}}}} and {{&${name}}} print a value unescaped; use {{${name}}}.`);
        break;
      case '>':
        out.push(`partials ({{>${name}}}) are not supported.`);
        break;
      case 'name':
      case '#':
      case '^': {
        let node: VarNode | null = null;
        if (name === '.') {
          if (!inSection || type !== 'name')
            out.push('{{.}} may only be printed inside a {{#name}}…{{/name}} section.');
        } else {
          node = resolve(name, scopes);
          if (node === null)
            out.push(`{{${name}}} is not a subscriber template variable (they are: ${VARIABLE_NAMES}).`);
        }
        if (type === 'name') break;
        const children = Array.isArray(token[4]) ? (token[4] as MustacheToken[]) : [];
        // An inverted section renders with the context it is in; a section with its value's.
        const inner = type === '#' && node !== null ? [...scopes, scopeOf(node)] : scopes;
        walk(children, inner, inSection || type === '#', out);
        break;
      }
      default:
        break; // text, comments, delimiter changes
    }
  }
}

/** What is wrong with one part of a page's template, each message naming the locale and the part; empty when nothing. */
export function templateErrors(text: string, locale: SubscriberLocale, part: SubscriberTemplatePart): string[] {
  const where = `subscriber_templates.${locale}.${part}`;
  let tokens: MustacheToken[];
  try {
    tokens = parseMustache(text);
  } catch (e) {
    return [`${where} is not valid mustache: ${(e as Error).message}.`];
  }
  const found: string[] = [];
  walk(tokens, [NOTICE_VARIABLE_TREE], false, found);
  // A mail client runs no script, but one in a page's own template is a mistake or worse: refused.
  if (part === 'html' && /<\s*script\b/i.test(text)) found.push('<script> is not allowed in a mail.');
  return [...new Set(found)].map((m) => `${where}: ${m}`);
}

const templateText = (locale: SubscriberLocale, part: SubscriberTemplatePart) =>
  z
    .string()
    .max(MAX_TEMPLATE_CHARS, `subscriber_templates.${locale}.${part} is at most ${MAX_TEMPLATE_CHARS} characters.`)
    .superRefine((text, ctx) => {
      for (const message of templateErrors(text, locale, part)) ctx.addIssue({ code: 'custom', input: text, message });
    })
    .optional();

const localeTemplates = (locale: SubscriberLocale) =>
  z
    .strictObject({
      subject: templateText(locale, 'subject').meta({ description: 'The subject line (line breaks become spaces).' }),
      text: templateText(locale, 'text').meta({ description: 'The plain-text part, above the fixed footer.' }),
      html: templateText(locale, 'html').meta({
        description: "The HTML part: a fragment, placed inside the mail's document above the fixed footer.",
      }),
    })
    .optional();

/** A page's own subscriber mail templates, per locale and part; what is not given uses the built-in one. */
export const SubscriberTemplatesSchema = z.strictObject({ en: localeTemplates('en'), de: localeTemplates('de') }).meta({
  id: 'SubscriberTemplates',
  description:
    "Subscriber notice mail templates per locale (Mustache; docs/subscribers.md lists the variables). The page's title above and the manage and unsubscribe links below are always added.",
});

// ── the built-in templates ──────────────────────────────────────────────────────────────────

/** The mails' own words (the status labels and other page words come from the page's locale). */
const MAIL_STRINGS = {
  en: {
    updated: 'Updated',
    withdrawn: 'Withdrawn',
    maintenance: 'Maintenance',
    corrected: 'An earlier update about this incident was corrected. It now reads:',
    retracted: 'The update of {{update.created_at}} about this incident was withdrawn. Please disregard it.',
    view_incident: 'View the incident',
    view_maintenance: 'View the maintenance',
    why: 'You receive this e-mail because you subscribed to status updates from {{page.title}}.',
    manage: 'Manage your subscription',
    unsubscribe: 'Unsubscribe',
    confirm_subject: 'Confirm your subscription',
    confirm_lead: 'Please confirm your subscription to status updates from {{page.title}}.',
    confirm_body:
      'Someone, hopefully you, asked to receive status updates from {{page.title}} at this address. To confirm, open this link within 48 hours:',
    confirm_button: 'Confirm your subscription',
    confirm_ignore:
      'If you did not ask for this, ignore this e-mail: the address will not be subscribed and nothing more will be sent to it.',
    already_subject: 'You are already subscribed',
    already_lead: 'You are already subscribed to status updates from {{page.title}}.',
    already_body:
      'Someone asked to subscribe this address to status updates from {{page.title}}. It is subscribed already, so nothing has changed. If that was not you, you can ignore this e-mail.',
  },
  de: {
    updated: 'Aktualisiert',
    withdrawn: 'Zurückgezogen',
    maintenance: 'Wartung',
    corrected: 'Eine frühere Meldung zu diesem Vorfall wurde korrigiert. Sie lautet jetzt:',
    retracted:
      'Die Meldung vom {{update.created_at}} zu diesem Vorfall wurde zurückgezogen. Bitte betrachten Sie sie als gegenstandslos.',
    view_incident: 'Zum Vorfall',
    view_maintenance: 'Zur Wartung',
    why: 'Sie erhalten diese E-Mail, weil Sie Statusmeldungen von {{page.title}} abonniert haben.',
    manage: 'Abonnement verwalten',
    unsubscribe: 'Abbestellen',
    confirm_subject: 'Bitte bestätigen Sie Ihr Abonnement',
    confirm_lead: 'Bitte bestätigen Sie Ihr Abonnement der Statusmeldungen von {{page.title}}.',
    confirm_body:
      'Jemand – hoffentlich Sie – möchte an diese Adresse Statusmeldungen von {{page.title}} erhalten. Zum Bestätigen öffnen Sie innerhalb von 48 Stunden diesen Link:',
    confirm_button: 'Abonnement bestätigen',
    confirm_ignore:
      'Wenn Sie das nicht angefordert haben, ignorieren Sie diese E-Mail: Die Adresse wird nicht angemeldet und erhält nichts weiter.',
    already_subject: 'Sie sind bereits angemeldet',
    already_lead: 'Sie erhalten die Statusmeldungen von {{page.title}} bereits.',
    already_body:
      'Jemand wollte diese Adresse für die Statusmeldungen von {{page.title}} anmelden. Sie ist bereits angemeldet; es hat sich nichts geändert. Wenn Sie das nicht waren, können Sie diese E-Mail ignorieren.',
  },
} satisfies Record<SubscriberLocale, Record<string, string>>;

/** Inline styles only: mail clients drop <style> and external sheets. Colours pass WCAG AA on white. */
const CSS = {
  body: "margin:0;padding:0;background:#ffffff;color:#1f1f1f;font-family:-apple-system,BlinkMacSystemFont,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;font-size:16px;line-height:1.5",
  wrap: 'max-width:600px;margin:0 auto;padding:24px 16px',
  top: 'margin:0 0 16px;font-size:14px',
  h1: 'margin:0 0 12px;font-size:22px;line-height:1.3;font-weight:bold',
  h2: 'margin:20px 0 8px;font-size:16px;font-weight:bold',
  p: 'margin:0 0 16px',
  meta: 'margin:0 0 16px;color:#4a4a4a',
  ul: 'margin:0 0 16px;padding-left:20px',
  a: 'color:#0b57d0;text-decoration:underline',
  hr: 'border:0;border-top:1px solid #cccccc;margin:24px 0 16px',
  small: 'margin:0 0 8px;font-size:14px;color:#4a4a4a',
  button:
    'display:inline-block;padding:10px 18px;background:#0b57d0;color:#ffffff;text-decoration:none;border-radius:4px;font-weight:bold',
};

/** A string of ours placed in HTML: escaped like a value (its `{{…}}` hold no character that escaping changes). */
const h = escapeHtml;

function subjectTemplate(locale: SubscriberLocale): string {
  const m = MAIL_STRINGS[locale];
  return [
    '[{{page.title}}] ',
    '{{#is_update}}{{incident.name}}: {{update.status_label}}{{/is_update}}',
    `{{#is_correction}}${m.updated}: {{incident.name}}{{/is_correction}}`,
    `{{#is_retraction}}${m.withdrawn}: {{incident.name}}{{/is_retraction}}`,
    `{{#is_maintenance}}${m.maintenance}: {{maintenance.name}} — {{maintenance.status_label}}{{/is_maintenance}}`,
  ].join('');
}

const windowOf = (locale: SubscriberLocale): string =>
  fill(stringsOf(locale).scheduled_window, {
    from: '{{maintenance.scheduled_for}}',
    until: '{{maintenance.scheduled_until}}',
  });

function textTemplate(locale: SubscriberLocale): string {
  const m = MAIL_STRINGS[locale];
  const s = stringsOf(locale);
  return `{{#is_update}}
{{incident.name}}
{{update.status_label}} · {{update.created_at}}

{{update.body}}
{{/is_update}}
{{#is_correction}}
{{incident.name}}
${m.corrected}

{{update.status_label}} · {{update.created_at}}

{{update.body}}
{{/is_correction}}
{{#is_retraction}}
{{incident.name}}
${m.retracted}
{{/is_retraction}}
{{#is_maintenance}}
{{maintenance.name}}
{{maintenance.status_label}} · ${windowOf(locale)}

{{update.body}}
{{/is_maintenance}}
{{#has_components}}

${s.affected}:
{{#components}}
- {{name}}: {{status_label}}
{{/components}}
{{/has_components}}

{{#incident}}
${m.view_incident}: {{incident.url}}
{{/incident}}
{{#maintenance}}
${m.view_maintenance}: {{maintenance.url}}
{{/maintenance}}
`;
}

function htmlTemplate(locale: SubscriberLocale): string {
  const m = MAIL_STRINGS[locale];
  const s = stringsOf(locale);
  const link = (href: string, label: string) =>
    `<p style="${CSS.p}"><a href="${href}" style="${CSS.a}">${h(label)}</a></p>`;
  return `{{#is_update}}
<h1 style="${CSS.h1}">{{incident.name}}</h1>
<p style="${CSS.meta}"><strong>{{update.status_label}}</strong> · {{update.created_at}}</p>
<p style="${CSS.p}">{{update.body}}</p>
{{/is_update}}
{{#is_correction}}
<h1 style="${CSS.h1}">{{incident.name}}</h1>
<p style="${CSS.p}"><strong>${h(m.corrected)}</strong></p>
<p style="${CSS.meta}"><strong>{{update.status_label}}</strong> · {{update.created_at}}</p>
<p style="${CSS.p}">{{update.body}}</p>
{{/is_correction}}
{{#is_retraction}}
<h1 style="${CSS.h1}">{{incident.name}}</h1>
<p style="${CSS.p}"><strong>${h(m.retracted)}</strong></p>
{{/is_retraction}}
{{#is_maintenance}}
<h1 style="${CSS.h1}">{{maintenance.name}}</h1>
<p style="${CSS.meta}"><strong>{{maintenance.status_label}}</strong> · ${h(windowOf(locale))}</p>
<p style="${CSS.p}">{{update.body}}</p>
{{/is_maintenance}}
{{#has_components}}
<h2 style="${CSS.h2}">${h(s.affected)}</h2>
<ul style="${CSS.ul}">
{{#components}}
<li>{{name}}: {{status_label}}</li>
{{/components}}
</ul>
{{/has_components}}
{{#incident}}
${link('{{incident.url}}', m.view_incident)}
{{/incident}}
{{#maintenance}}
${link('{{maintenance.url}}', m.view_maintenance)}
{{/maintenance}}
`;
}

const DEFAULTS: Record<SubscriberLocale, NoticeTemplates> = {
  en: { subject: subjectTemplate('en'), text: textTemplate('en'), html: htmlTemplate('en') },
  de: { subject: subjectTemplate('de'), text: textTemplate('de'), html: htmlTemplate('de') },
};

/** The built-in notice templates of a locale. */
export function defaultNoticeTemplates(locale: SubscriberLocale): NoticeTemplates {
  return DEFAULTS[locale];
}

/** The notice templates a mail uses: the page's own part where given, else the built-in one. */
export function noticeTemplates(
  locale: SubscriberLocale,
  overrides: SubscriberTemplateOverrides | null | undefined,
): NoticeTemplates {
  const own = overrides?.[locale];
  const base = DEFAULTS[locale];
  if (!own) return base;
  return { subject: own.subject ?? base.subject, text: own.text ?? base.text, html: own.html ?? base.html };
}

// ── what surrounds every mail (not overridable) ─────────────────────────────────────────────

/**
 * What surrounds a body in each part (`head` + body + `foot`): the page's title and link above
 * (and the HTML document with its language), and below, when `links.manage` is in the view, why
 * the mail came and the manage and unsubscribe links.
 */
export interface MailFrame {
  htmlHead: string;
  htmlFoot: string;
  textHead: string;
  textFoot: string;
}

function frame(locale: SubscriberLocale): MailFrame {
  const m = MAIL_STRINGS[locale];
  return {
    htmlHead: `<!doctype html>
<html lang="${locale}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{page.title}}</title>
</head>
<body style="${CSS.body}">
<div style="${CSS.wrap}">
<p style="${CSS.top}"><a href="{{links.page}}" style="${CSS.a}">{{page.title}}</a></p>
`,
    htmlFoot: `{{#links.manage}}
<hr style="${CSS.hr}">
<p style="${CSS.small}">${h(m.why)}</p>
<p style="${CSS.small}"><a href="{{links.manage}}" style="${CSS.a}">${h(m.manage)}</a> · <a href="{{links.unsubscribe}}" style="${CSS.a}">${h(m.unsubscribe)}</a></p>
{{/links.manage}}
</div>
</body>
</html>
`,
    textHead: `{{page.title}} · {{links.page}}\n\n`,
    textFoot: `{{#links.manage}}

-- 
${m.why}
${m.manage}: {{links.manage}}
${m.unsubscribe}: {{links.unsubscribe}}
{{/links.manage}}
`,
  };
}

const FRAMES: Record<SubscriberLocale, MailFrame> = { en: frame('en'), de: frame('de') };

export function mailFrame(locale: SubscriberLocale): MailFrame {
  return FRAMES[locale];
}

/** The confirmation mail (view: page, links.page, links.confirm). */
function confirmTemplates(locale: SubscriberLocale): NoticeTemplates {
  const m = MAIL_STRINGS[locale];
  return {
    subject: `[{{page.title}}] ${m.confirm_subject}`,
    text: `${m.confirm_lead}

${m.confirm_body}

{{links.confirm}}

${m.confirm_ignore}
`,
    html: `<h1 style="${CSS.h1}">${h(m.confirm_subject)}</h1>
<p style="${CSS.p}">${h(m.confirm_body)}</p>
<p style="${CSS.p}"><a href="{{links.confirm}}" style="${CSS.button}">${h(m.confirm_button)}</a></p>
<p style="${CSS.small}">{{links.confirm}}</p>
<p style="${CSS.p}">${h(m.confirm_ignore)}</p>
`,
  };
}

/** The "already subscribed" mail (view: page, links). */
function alreadyTemplates(locale: SubscriberLocale): NoticeTemplates {
  const m = MAIL_STRINGS[locale];
  return {
    subject: `[{{page.title}}] ${m.already_subject}`,
    text: `${m.already_lead}

${m.already_body}
`,
    html: `<h1 style="${CSS.h1}">${h(m.already_subject)}</h1>
<p style="${CSS.p}">${h(m.already_body)}</p>
`,
  };
}

const CONFIRM: Record<SubscriberLocale, NoticeTemplates> = { en: confirmTemplates('en'), de: confirmTemplates('de') };
const ALREADY: Record<SubscriberLocale, NoticeTemplates> = { en: alreadyTemplates('en'), de: alreadyTemplates('de') };

export function confirmMailTemplates(locale: SubscriberLocale): NoticeTemplates {
  return CONFIRM[locale];
}

export function alreadySubscribedTemplates(locale: SubscriberLocale): NoticeTemplates {
  return ALREADY[locale];
}
