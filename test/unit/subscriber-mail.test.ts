import { describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import { statusPage } from '../../src/channels/status-page/config.js';
import type { NoticeKind, SubscriberLocale, SubscriberNotice } from '../../src/ports/subscribers.js';
import { TimeFormat } from '../../src/status/i18n.js';
import { de } from '../../src/status/locales/de.js';
import { en } from '../../src/status/locales/en.js';
import {
  MAX_SUBJECT,
  renderAlreadySubscribedMail,
  renderConfirmMail,
  noticeMailRenderer,
  renderNoticeMail,
  subscriberLinks,
  type RenderedMail,
} from '../../src/subscribers/mail.js';
import {
  MAX_TEMPLATE_CHARS,
  NOTICE_TEMPLATE_VARIABLES,
  SubscriberTemplatesSchema,
  templateErrors,
  type SubscriberTemplateOverrides,
} from '../../src/subscribers/templates.js';

/** The mails subscribers read (src/subscribers/mail.ts, templates.ts). */

const PAGE = { title: 'Acme', public_url: 'https://status.acme.test' };
const LINKS = subscriberLinks(PAGE.public_url, { manage: 'man.AbC-1', unsubscribe: 'uns.XyZ_2' });
const MANAGE = 'https://status.acme.test/subscriptions/manage?token=man.AbC-1';
const UNSUBSCRIBE = 'https://status.acme.test/subscriptions/unsubscribe?token=uns.XyZ_2';
const BODY = 'We found the cause.\nA fix is rolling out.';

function notice(kind: NoticeKind, o: { name?: string; body?: string } = {}): SubscriberNotice {
  const maintenance = kind === 'maintenance';
  return {
    id: maintenance ? 'ntc_mnt_1_mup_2' : 'ntc_dlv_01JH40A1',
    kind,
    created_at: '2026-11-27T19:31:00.000Z',
    execution_id: maintenance ? null : 'exe_1',
    page: PAGE,
    component_ids: ['cmp_api'],
    components: [{ id: 'cmp_api', name: 'API', status: maintenance ? 'under_maintenance' : 'partial_outage' }],
    incident: maintenance
      ? null
      : {
          id: 'pin_1',
          name: o.name ?? 'Checkout errors',
          impact: 'major',
          status: 'identified',
          url: 'https://status.acme.test/incidents/pin_1',
          created_at: '2026-11-27T19:00:00.000Z',
        },
    maintenance: maintenance
      ? {
          id: 'mnt_1',
          name: o.name ?? 'Database upgrade',
          status: 'in_progress',
          scheduled_for: '2026-11-28T01:00:00.000Z',
          scheduled_until: '2026-11-28T03:00:00.000Z',
          url: 'https://status.acme.test/maintenances/mnt_1',
        }
      : null,
    update: {
      id: 'upd_1',
      status: maintenance ? 'in_progress' : 'identified',
      body: o.body ?? BODY,
      created_at: '2026-11-27T19:30:00.000Z',
      updated_at: kind === 'incident_correction' ? '2026-11-27T19:31:00.000Z' : null,
    },
  };
}

const KINDS: NoticeKind[] = ['incident_update', 'incident_correction', 'incident_retraction', 'maintenance'];

/** The HTML part's visible text, roughly: tags dropped, the entities mails use decoded. */
const textOf = (html: string) =>
  html
    .replace(/<br>\n?/g, '\n')
    .replace(/<[^>]+>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&');

describe('notice mail subjects', () => {
  const cases: [NoticeKind, SubscriberLocale, string][] = [
    ['incident_update', 'en', '[Acme] Checkout errors: Identified'],
    ['incident_update', 'de', '[Acme] Checkout errors: Ursache gefunden'],
    ['incident_correction', 'en', '[Acme] Updated: Checkout errors'],
    ['incident_correction', 'de', '[Acme] Aktualisiert: Checkout errors'],
    ['incident_retraction', 'en', '[Acme] Withdrawn: Checkout errors'],
    ['incident_retraction', 'de', '[Acme] Zurückgezogen: Checkout errors'],
    ['maintenance', 'en', '[Acme] Maintenance: Database upgrade — In progress'],
    ['maintenance', 'de', '[Acme] Wartung: Database upgrade — Läuft'],
  ];
  it.each(cases)('%s in %s', (kind, locale, subject) => {
    expect(renderNoticeMail(notice(kind), locale, LINKS).subject).toBe(subject);
  });

  it("takes the status words from the page's locale strings", () => {
    expect(renderNoticeMail(notice('incident_update'), 'en', LINKS).subject).toContain(en.public_state.identified);
    expect(renderNoticeMail(notice('maintenance'), 'de', LINKS).subject).toContain(de.maintenance_state.in_progress);
  });

  it('is one line, whatever the names hold, and at most 250 characters', () => {
    const m = renderNoticeMail(notice('incident_update', { name: 'Bad\r\nBcc: x@example.com\u2028next' }), 'en', LINKS);
    expect(m.subject).toBe('[Acme] Bad Bcc: x@example.com next: Identified');
    const long = renderNoticeMail(notice('incident_update', { name: '😀'.repeat(300) }), 'en', LINKS).subject;
    expect(long.length).toBeLessThanOrEqual(MAX_SUBJECT);
    expect(long.endsWith('…')).toBe(true);
    expect(() => encodeURIComponent(long)).not.toThrow(); // no half of a surrogate pair left behind
  });
});

describe('notice mail bodies', () => {
  it.each(KINDS.flatMap((k) => (['en', 'de'] as const).map((l) => [k, l] as const)))(
    '%s in %s: text and HTML say the same, with the links at the bottom',
    (kind, locale) => {
      const m = renderNoticeMail(notice(kind), locale, LINKS);
      for (const part of [m.text, textOf(m.html)]) {
        if (kind !== 'incident_retraction') expect(part).toContain(BODY);
        expect(part).toContain(kind === 'maintenance' ? 'Database upgrade' : 'Checkout errors');
        expect(part).toContain('API: ');
      }
      // The links come last: after everything the notice says, the manage link, then unsubscribe.
      for (const [part, manage, unsubscribe] of [
        [m.text, MANAGE, UNSUBSCRIBE],
        [m.html, `href="${MANAGE}"`, `href="${UNSUBSCRIBE}"`],
      ] as const) {
        expect(part.indexOf(manage)).toBeGreaterThan(part.lastIndexOf('API'));
        expect(part.indexOf(unsubscribe)).toBeGreaterThan(part.indexOf(manage));
      }
      expect(m.html).toContain(`<html lang="${locale}">`);
      // Both parts name the page above the notice.
      expect(m.text.startsWith('Acme · https://status.acme.test\n\n')).toBe(true);
      expect(m.html).toContain('<a href="https://status.acme.test"');
    },
  );

  it('says when the update was published, in UTC in the reader’s locale', () => {
    for (const locale of ['en', 'de'] as const) {
      const when = new TimeFormat(locale, 'UTC').time('2026-11-27T19:30:00.000Z').text;
      expect(when).toContain('UTC');
      const m = renderNoticeMail(notice('incident_update'), locale, LINKS);
      expect(m.text).toContain(when);
      expect(textOf(m.html)).toContain(when);
    }
  });

  it('a correction says the earlier message was corrected and shows the new words', () => {
    const m = renderNoticeMail(
      notice('incident_correction', { body: 'Only EU customers were affected.' }),
      'en',
      LINKS,
    );
    expect(m.text).toContain('was corrected');
    expect(m.text).toContain('Only EU customers were affected.');
    expect(textOf(m.html)).toContain('was corrected');
    const d = renderNoticeMail(notice('incident_correction'), 'de', LINKS);
    expect(d.text).toContain('wurde korrigiert');
  });

  it('a retraction says the update was withdrawn and is to be disregarded, without repeating its words', () => {
    const m = renderNoticeMail(notice('incident_retraction', { body: 'Posted on the wrong page.' }), 'en', LINKS);
    expect(m.text).toMatch(/withdrawn\. Please disregard it\./);
    expect(textOf(m.html)).toMatch(/withdrawn\. Please disregard it\./);
    expect(m.text + m.html).not.toContain('Posted on the wrong page.');
    expect(renderNoticeMail(notice('incident_retraction'), 'de', LINKS).text).toContain('zurückgezogen');
  });

  it('a maintenance shows its window and state; components carry the page’s status words', () => {
    const m = renderNoticeMail(notice('maintenance'), 'en', LINKS);
    const tf = new TimeFormat('en', 'UTC');
    expect(m.text).toContain(
      `Scheduled from ${tf.time('2026-11-28T01:00:00.000Z').text} to ${tf.time('2026-11-28T03:00:00.000Z').text}`,
    );
    expect(m.text).toContain(`- API: ${en.component_status.under_maintenance}`);
    expect(m.text).toContain('https://status.acme.test/maintenances/mnt_1');
    expect(renderNoticeMail(notice('incident_update'), 'de', LINKS).text).toContain(
      `- API: ${de.component_status.partial_outage}`,
    );
  });

  it('the HTML is a simple accessible document: a heading, real links, no image, script or style sheet', () => {
    const { html } = renderNoticeMail(notice('incident_update'), 'en', LINKS);
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).toMatch(/<h1[^>]*>Checkout errors<\/h1>/);
    expect(html).toContain('href="https://status.acme.test/incidents/pin_1"');
    expect(html).not.toMatch(/<img|<script|<style|<link|javascript:/i);
  });
});

describe('hostile input', () => {
  const evil = '<script>alert(1)</script><img src=x onerror=alert(2)>"\'&';

  it('is escaped in the HTML part, in the update body and in the incident name, and shown as typed in the text', () => {
    for (const kind of ['incident_update', 'incident_correction', 'maintenance'] as const) {
      const m = renderNoticeMail(notice(kind, { name: evil, body: evil }), 'en', LINKS);
      expect(m.html).not.toMatch(/<script|<img/i);
      expect(m.html).toContain(
        '&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;&quot;&#39;&amp;',
      );
      expect(m.text).toContain(evil);
    }
  });

  it('cannot break out through a stored template that bypasses the checks', () => {
    const stored = { en: { html: '<p>{{{update.body}}}{{&incident.name}}{{>x}}</p>' } } as SubscriberTemplateOverrides;
    const m = renderNoticeMail(notice('incident_update', { name: evil, body: evil }), 'en', LINKS, stored);
    expect(m.html).not.toMatch(/<script|<img/i);
  });
});

describe('notice mail headers', () => {
  it('one-click unsubscribe (RFC 8058), automatic, the notice id', () => {
    for (const kind of KINDS) {
      const m = renderNoticeMail(notice(kind), 'de', LINKS);
      expect(m.headers).toMatchObject({
        'List-Unsubscribe': `<${UNSUBSCRIBE}>`,
        'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
        'Auto-Submitted': 'auto-generated',
        'X-Herald-Notice': notice(kind).id,
      });
      expect(m.headers['Message-ID']).toBeUndefined(); // the sender sets it
      for (const value of Object.values(m.headers)) expect(value).not.toMatch(/[\r\n]/);
    }
  });
});

describe('subscriberLinks', () => {
  it('builds the manage and unsubscribe links under the public URL', () => {
    expect(LINKS).toEqual({ manage: MANAGE, unsubscribe: UNSUBSCRIBE, page: 'https://status.acme.test' });
    expect(subscriberLinks('https://x.test/status/', { manage: 'a+b/c', unsubscribe: 'd' })).toEqual({
      manage: 'https://x.test/status/subscriptions/manage?token=a%2Bb%2Fc',
      unsubscribe: 'https://x.test/status/subscriptions/unsubscribe?token=d',
      page: 'https://x.test/status',
    });
  });
});

describe('confirmation and already-subscribed mails', () => {
  const confirmUrl = 'https://status.acme.test/subscriptions/confirm?token=cnf.1';

  it('the confirmation carries its link, is automatic and offers nothing to leave', () => {
    const en1 = renderConfirmMail(PAGE, 'en', confirmUrl);
    const de1 = renderConfirmMail(PAGE, 'de', confirmUrl);
    expect(en1.subject).toBe('[Acme] Confirm your subscription');
    expect(de1.subject).toBe('[Acme] Bitte bestätigen Sie Ihr Abonnement');
    for (const m of [en1, de1]) {
      expect(m.text).toContain(confirmUrl);
      expect(m.html).toContain(`href="${confirmUrl}"`);
      expect(m.headers).toEqual({ 'Auto-Submitted': 'auto-generated', 'X-Auto-Response-Suppress': 'OOF, AutoReply' });
      expect(m.text + m.html).not.toContain('/subscriptions/unsubscribe');
    }
    expect(de1.html).toContain('<html lang="de">');
  });

  it('already subscribed: the manage and unsubscribe links, and the one-click header', () => {
    const check = (m: RenderedMail) => {
      expect(m.text).toContain(MANAGE);
      expect(m.text).toContain(UNSUBSCRIBE);
      expect(m.html).toContain(`href="${UNSUBSCRIBE}"`);
      expect(m.headers['List-Unsubscribe']).toBe(`<${UNSUBSCRIBE}>`);
      expect(m.headers['List-Unsubscribe-Post']).toBe('List-Unsubscribe=One-Click');
      expect(m.headers['Auto-Submitted']).toBe('auto-generated');
    };
    const a = renderAlreadySubscribedMail(PAGE, 'en', LINKS);
    const b = renderAlreadySubscribedMail(PAGE, 'de', LINKS);
    check(a);
    check(b);
    expect(a.subject).toBe('[Acme] You are already subscribed');
    expect(b.subject).toBe('[Acme] Sie sind bereits angemeldet');
  });

  it('escapes the page title in the HTML', () => {
    const m = renderConfirmMail({ ...PAGE, title: '<b>Acme</b>' }, 'en', confirmUrl);
    expect(m.html).not.toContain('<b>');
    expect(m.subject).toBe('[<b>Acme</b>] Confirm your subscription');
  });
});

describe('a notice mail rendered once per locale', () => {
  it('is, for every subscriber, exactly the mail rendered for that subscriber alone', () => {
    // Links whose characters the HTML part escapes, and a template that shows each link twice.
    const odd = subscriberLinks('https://status.acme.test/a&b<c>', { manage: 'm.1"x', unsubscribe: "u.2'y" });
    const own: SubscriberTemplateOverrides = {
      en: {
        text: '{{links.manage}} {{links.unsubscribe}} {{links.page}} {{links.manage}}',
        html: '<a href="{{links.page}}">{{links.unsubscribe}}</a>',
      },
    };
    for (const kind of KINDS)
      for (const locale of ['en', 'de'] as const)
        for (const overrides of [null, own]) {
          const once = noticeMailRenderer(notice(kind), locale, overrides);
          for (const links of [LINKS, odd])
            expect(once(links)).toEqual(renderNoticeMail(notice(kind), locale, links, overrides));
        }
  });

  it('renders per subscriber where a page puts a link into the subject', () => {
    const own: SubscriberTemplateOverrides = { en: { subject: '{{incident.name}} {{links.manage}}' } };
    const once = noticeMailRenderer(notice('incident_update'), 'en', own);
    expect(once(LINKS).subject).toBe(`Checkout errors ${MANAGE}`);
    expect(once(LINKS)).toEqual(renderNoticeMail(notice('incident_update'), 'en', LINKS, own));
  });
});

describe("a page's own templates", () => {
  it('are used when given, per locale and part; the rest stays built in, the footer always stays', () => {
    const own: SubscriberTemplateOverrides = {
      de: {
        subject: '{{page.title}} meldet: {{incident.name}}{{maintenance.name}}',
        html: '<h1>{{incident.name}}</h1><p>{{update.body}}</p>{{#components}}<i>{{name}}={{status_label}}</i>{{/components}}',
      },
    };
    const d = renderNoticeMail(notice('incident_update', { body: 'a < b' }), 'de', LINKS, own);
    expect(d.subject).toBe('Acme meldet: Checkout errors');
    expect(d.html).toContain('<h1>Checkout errors</h1><p>a &lt; b</p><i>API=Teilweiser Ausfall</i>');
    expect(d.html).toContain(`href="${UNSUBSCRIBE}"`);
    expect(d.html).toContain('<html lang="de">');
    expect(d.text).toBe(renderNoticeMail(notice('incident_update', { body: 'a < b' }), 'de', LINKS).text);
    // English readers keep the built-in mail.
    expect(renderNoticeMail(notice('incident_update'), 'en', LINKS, own).subject).toBe(
      '[Acme] Checkout errors: Identified',
    );
    const t = renderNoticeMail(notice('maintenance'), 'en', LINKS, { en: { text: 'Just: {{update.body}}' } });
    expect(t.text.startsWith(`Acme · https://status.acme.test\n\nJust: ${BODY}\n`)).toBe(true);
    expect(t.text).toContain(UNSUBSCRIBE);
  });

  it('are checked: every documented variable passes', () => {
    const ok = {
      en: {
        subject: '{{#is_update}}{{incident.name}}{{/is_update}}{{^incident}}{{maintenance.name}}{{/incident}}',
        text: '{{#incident}}{{name}} {{status_label}} {{impact_label}} {{url}}{{/incident}}{{#components}}{{name}}{{/components}}{{#update.body}}{{.}}{{/update.body}}',
        html: '{{! a comment }}<p>{{links.manage}} {{page.url}} {{maintenance.scheduled_for}}</p>',
      },
      de: {},
    };
    expect(SubscriberTemplatesSchema.safeParse(ok).success).toBe(true);
    for (const v of NOTICE_TEMPLATE_VARIABLES) {
      const name = v.name.replace('components[].', '');
      const text = v.name.startsWith('components[].') ? `{{#components}}{{${name}}}{{/components}}` : `{{${name}}}`;
      expect(templateErrors(text, 'en', 'text'), v.name).toEqual([]);
    }
  });

  const rejected: [string, SubscriberLocale, 'subject' | 'text' | 'html', RegExp][] = [
    ['{{incident.title}}', 'de', 'subject', /subscriber_templates\.de\.subject: \{\{incident\.title\}\} is not a/],
    ['{{#components}}{{url}}{{/components}}', 'en', 'text', /subscriber_templates\.en\.text: \{\{url\}\} is not a/],
    ['{{name}}', 'en', 'html', /subscriber_templates\.en\.html: \{\{name\}\} is not a/],
    ['{{constructor}}', 'en', 'text', /\{\{constructor\}\} is not a/],
    ['{{#incident}}unclosed', 'de', 'html', /subscriber_templates\.de\.html is not valid mustache/],
    ['{{update.body', 'en', 'text', /subscriber_templates\.en\.text is not valid mustache/],
    ['{{{update.body}}}', 'en', 'html', /subscriber_templates\.en\.html: .*unescaped/],
    ['{{>footer}}', 'en', 'text', /partials/],
    ['<p>hi</p><SCRIPT src=x></SCRIPT>', 'en', 'html', /subscriber_templates\.en\.html: <script> is not allowed/],
  ];
  it.each(rejected)('refuses %s (%s %s) with a message naming locale and part', (text, locale, part, message) => {
    const r = SubscriberTemplatesSchema.safeParse({ [locale]: { [part]: text } });
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => i.message).join('\n')).toMatch(message);
    expect(r.error!.issues[0]!.path).toEqual([locale, part]);
  });

  it('refuses a part over 20,000 characters, an unknown locale or part', () => {
    expect(SubscriberTemplatesSchema.safeParse({ en: { text: 'x'.repeat(MAX_TEMPLATE_CHARS) } }).success).toBe(true);
    const long = SubscriberTemplatesSchema.safeParse({ en: { text: 'x'.repeat(MAX_TEMPLATE_CHARS + 1) } });
    expect(long.error!.issues[0]!.message).toBe('subscriber_templates.en.text is at most 20000 characters.');
    expect(SubscriberTemplatesSchema.safeParse({ fr: { text: 'x' } }).success).toBe(false);
    expect(SubscriberTemplatesSchema.safeParse({ en: { body: 'x' } }).success).toBe(false);
  });

  it("are the status_page connection's subscriber_templates (null by default), whose output the mail takes", () => {
    const base = { title: 'Acme', public_url: 'https://status.acme.test' };
    expect(statusPage.configSchema.parse(base).subscriber_templates).toBeNull();
    const own = statusPage.configSchema.parse({ ...base, subscriber_templates: { de: { subject: '{{page.title}}' } } });
    expect(own.subscriber_templates).toEqual({ de: { subject: '{{page.title}}' } });
    expect(renderNoticeMail(notice('incident_update'), 'de', LINKS, own.subscriber_templates).subject).toBe('Acme');
    const bad = statusPage.configSchema.safeParse({ ...base, subscriber_templates: { en: { text: '{{oops}}' } } });
    expect(bad.error!.issues[0]!.path).toEqual(['subscriber_templates', 'en', 'text']);
    expectTypeOf<z.output<typeof SubscriberTemplatesSchema>>().toExtend<SubscriberTemplateOverrides>();
  });
});
