import Mustache from 'mustache';
import { escapeHtml } from '../../channels/common/escape.js';
import type { PublicComponent, PublicPageConfig } from '../../domain/status/public.js';
import type { ManageView } from '../../services/subscriptions.js';
import { fill, STATUS_LOCALES, type StatusLocale } from '../i18n.js';
import { entries } from '../model.js';
import { pathsOf } from '../view.js';
import { subscriptionStrings, type SubscriptionStrings } from './strings.js';

/**
 * The subscription pages: server-rendered, no script (the CSP allows none), every value escaped
 * by mustache, every change behind a POST button (mail scanners follow links, never forms), and
 * the tokens only in forms and this site's own links (Referrer-Policy: no-referrer keeps them
 * from leaving with a click).
 */

/** Where a page is rendered: its language, where the status page is mounted, the page's config. */
export interface PageFrame {
  locale: StatusLocale;
  /** The status page's mount (`/status`, or `` on its own host). */
  base: string;
  page: PublicPageConfig | null;
}

export type SubscriptionPage =
  | { kind: 'inbox'; webhook: boolean }
  | { kind: 'confirm'; token: string }
  | { kind: 'confirmed'; already: boolean; manageToken: string }
  | { kind: 'expired' }
  | { kind: 'invalid' }
  | { kind: 'manage'; view: ManageView; token: string; components: PublicComponent[]; saved: boolean }
  | { kind: 'unsubscribe'; address: string; token: string }
  | { kind: 'unsubscribed' }
  | { kind: 'throttled'; retryAfterS: number }
  | { kind: 'email_off' }
  | { kind: 'invalid_request'; errors: string[] }
  | { kind: 'not_set_up' }
  | { kind: 'unavailable' };

const LANGUAGE_NAMES: Record<StatusLocale, string> = { en: 'English', de: 'Deutsch' };

const layout = `<!doctype html>
<html lang="{{lang}}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>{{heading}}{{#title}} · {{title}}{{/title}}</title>
<link rel="stylesheet" href="{{links.css}}">
</head>
<body>
{{#title}}
<header class="site">
<div class="wrap head">
<a class="brand" href="{{links.home}}"><span>{{title}}</span></a>
</div>
</header>
{{/title}}
<main id="main">
<div class="wrap">
<h1>{{heading}}</h1>
{{> content}}
</div>
</main>
{{#back}}
<footer class="site">
<div class="wrap">
<p><a href="{{links.home}}">{{back}}</a></p>
</div>
</footer>
{{/back}}
</body>
</html>
`;

const paragraphs = '{{#body}}<p>{{.}}</p>\n{{/body}}';

const content = {
  plain: paragraphs,
  confirm: `${paragraphs}<form method="post" action="{{actions.confirm}}">
<input type="hidden" name="token" value="{{token}}">
<p><button type="submit">{{s.confirm_button}}</button></p>
</form>`,
  confirmed: `${paragraphs}<p><a href="{{manageHref}}">{{s.manage_link}}</a></p>`,
  errors: `<ul class="list">
{{#errors}}<li>{{.}}</li>
{{/errors}}
</ul>`,
  unsubscribe: `${paragraphs}<form method="post" action="{{actions.unsubscribe}}">
<input type="hidden" name="token" value="{{token}}">
<p><button type="submit">{{s.unsubscribe_button}}</button></p>
</form>`,
  manage: `{{#saved}}<p role="status"><strong>{{s.saved}}</strong></p>{{/saved}}
<p>{{addressLine}}</p>
{{#pending}}<p>{{s.manage_pending}}</p>{{/pending}}
<form method="post" action="{{actions.manage}}">
<input type="hidden" name="token" value="{{token}}">
{{#hasComponents}}
<fieldset>
<legend>{{s.components_legend}}</legend>
<p id="components-hint">{{s.components_hint}}</p>
<ul class="list">
{{#entries}}
{{#group}}
<li><fieldset>
<legend>{{name}}</legend>
<ul class="list">
{{#members}}
<li><label><input type="checkbox" name="components" value="{{id}}" aria-describedby="components-hint"{{#checked}} checked{{/checked}}> {{name}}</label></li>
{{/members}}
</ul>
</fieldset></li>
{{/group}}
{{#component}}
<li><label><input type="checkbox" name="components" value="{{id}}" aria-describedby="components-hint"{{#checked}} checked{{/checked}}> {{name}}</label></li>
{{/component}}
{{/entries}}
</ul>
</fieldset>
{{/hasComponents}}
<p><label for="locale">{{s.locale_label}}</label>
<select id="locale" name="locale">
{{#locales}}<option value="{{code}}" lang="{{code}}"{{#selected}} selected{{/selected}}>{{name}}</option>
{{/locales}}
</select></p>
<p><button type="submit">{{s.save_button}}</button></p>
</form>
<form method="post" action="{{actions.unsubscribe}}">
<input type="hidden" name="token" value="{{unsubscribeToken}}">
<p><button type="submit" class="secondary">{{s.unsubscribe_button}}</button></p>
</form>`,
} as const;

/** As the status page escapes (view.ts): & < > " ' — enough for text and quoted attributes. */
const ESCAPE = { escape: (v: unknown) => escapeHtml(String(v)) };

/** The paths of the subscription routes under the status page's mount. */
export function subscriptionPaths(base: string, locale: StatusLocale) {
  const at = (p: string) => `${base}/subscriptions${p}?locale=${locale}`;
  return {
    subscribe: `${base}/subscriptions`,
    confirm: at('/confirm'),
    manage: at('/manage'),
    unsubscribe: at('/unsubscribe'),
    manageWith: (token: string) => `${at('/manage')}&token=${encodeURIComponent(token)}`,
  };
}

export function renderSubscriptionPage(f: PageFrame, p: SubscriptionPage): string {
  const s = subscriptionStrings(f.locale);
  const title = f.page?.title ?? '';
  const actions = subscriptionPaths(f.base, f.locale);
  const t = (template: string, values: Record<string, string> = {}) => fill(template, { title, ...values });
  const view = (heading: string, body: string[], extra: object = {}) => ({
    lang: f.locale,
    title,
    heading,
    back: f.page === null ? '' : s.back_home,
    links: pathsOf(f.base),
    s,
    actions,
    body,
    ...extra,
  });
  const [template, v] = ((): [string, object] => {
    switch (p.kind) {
      case 'inbox':
        return p.webhook
          ? [content.plain, view(s.inbox_webhook_title, [s.inbox_webhook_body])]
          : [content.plain, view(s.inbox_title, [s.inbox_body])];
      case 'confirm':
        return [content.confirm, view(s.confirm_title, [t(s.confirm_body)], { token: p.token })];
      case 'confirmed':
        return [
          content.confirmed,
          p.already
            ? view(s.already_title, [s.already_body], { manageHref: actions.manageWith(p.manageToken) })
            : view(s.confirmed_title, [t(s.confirmed_body)], { manageHref: actions.manageWith(p.manageToken) }),
        ];
      case 'expired':
        return [content.plain, view(s.expired_title, [s.expired_body])];
      case 'invalid':
        return [content.plain, view(s.invalid_title, [s.invalid_body])];
      case 'manage':
        return [content.manage, manageView(s, p, view(s.manage_title, []))];
      case 'unsubscribe':
        return [
          content.unsubscribe,
          view(t(s.unsubscribe_title, { address: p.address }), [t(s.unsubscribe_body)], { token: p.token }),
        ];
      case 'unsubscribed':
        return [content.plain, view(s.unsubscribed_title, [t(s.unsubscribed_body)])];
      case 'throttled':
        return [
          content.plain,
          view(s.throttled_title, [
            t(s.throttled_body, { minutes: String(Math.max(1, Math.ceil(p.retryAfterS / 60))) }),
          ]),
        ];
      case 'email_off':
        return [content.plain, view(s.email_off_title, [s.email_off_body])];
      case 'invalid_request':
        return [content.errors, view(s.invalid_request_title, [], { errors: p.errors })];
      case 'not_set_up':
        return [content.plain, view(s.not_set_up_title, [s.not_set_up_body])];
      case 'unavailable':
        return [content.plain, view(s.unavailable_title, [s.unavailable_body])];
    }
  })();
  return Mustache.render(layout, v, { content: template }, ESCAPE);
}

function manageView(
  s: SubscriptionStrings,
  p: Extract<SubscriptionPage, { kind: 'manage' }>,
  frame: Record<string, unknown>,
): object {
  const chosen = new Set(p.view.components);
  const row = (c: PublicComponent) => ({ id: c.id, name: c.name, checked: chosen.has(c.id) });
  const list = entries(p.components).map((e) =>
    e.kind === 'group'
      ? { group: { name: e.name, members: e.members.map(row) }, component: null }
      : { group: null, component: row(e.component) },
  );
  return {
    ...frame,
    saved: p.saved,
    addressLine: fill(s.manage_for, { address: p.view.address }),
    pending: p.view.state === 'pending',
    token: p.token,
    unsubscribeToken: p.view.unsubscribeToken,
    hasComponents: list.length > 0,
    entries: list,
    locales: STATUS_LOCALES.map((code) => ({ code, name: LANGUAGE_NAMES[code], selected: code === p.view.locale })),
  };
}

/** A refused field as the HTML form's reader is told of it (the problem's codes, in words). */
export function fieldMessage(s: SubscriptionStrings, field: string, code: string): string {
  if (code === 'invalid_email') return s.error_invalid_email;
  if (field === 'email' && code === 'required') return s.error_address_required;
  if (code === 'unknown_component') return s.error_unknown_component;
  if (field === 'url' || code === 'https_required' || code === 'destination_not_allowed') return s.error_url;
  return s.error_other;
}
