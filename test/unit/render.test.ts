import { describe, expect, it } from 'vitest';
import { escapeGoogleChat } from '../../src/channels/google-chat/escape.js';
import { CHANNEL_TYPES, channelOf, type ChannelType } from '../../src/channels/index.js';
import { escapeMarkdown, neutraliseMentions } from '../../src/channels/common/escape.js';
import { escapeSlack } from '../../src/channels/slack/escape.js';
import { escapeTelegram } from '../../src/channels/telegram/escape.js';
import {
  defaultMessageSource,
  incidentUrl,
  incidentView,
  renderMessage,
  sampleIncident,
  type RenderContext,
} from '../../src/domain/template/render.js';
import { sourceForChannel } from '../../src/domain/template/template.js';

const Z = '\u200B';
const EVIL = '<!channel> @everyone *bold* <script>';

const ctx = (variables: Record<string, string> = {}, incident = sampleIncident()): RenderContext => ({
  incident,
  execution: { id: 'exe_1' },
  variables,
});
/** The format of a channel, as its module gives it for a config (null: no connection, a preview). */
const format = (channel: ChannelType, config: Record<string, unknown> | null = null) =>
  channelOf(channel).format(config);
const render = (body: string, channel: ChannelType, variables: Record<string, string> = {}, subject = '') =>
  renderMessage({ subject, body }, ctx(variables), format(channel));

/** Removes what a renderer would consume, to see what the reader would see. */
const unescapeMarkdown = (s: string) => s.replace(/\\([!-/:-@[-`{-~])/g, '$1');

describe('the hostile value on every channel', () => {
  const chat: ChannelType[] = ['slack', 'teams', 'discord', 'mattermost', 'google_chat', 'telegram'];

  it.each(chat)('%s: no broadcast mention survives', (channel) => {
    const { body, subject } = render('Update: {{v}}', channel, { v: EVIL }, 'S {{v}}');
    for (const out of [body, subject]) {
      expect(out).not.toMatch(/@(everyone|here|channel|all)/i);
      expect(out).toContain(`@${Z}everyone`);
    }
  });

  it('slack: entities for & < >, so <!channel> and <script> are text; *bold* is broken', () => {
    const { body } = render('{{v}}', 'slack', { v: `${EVIL} & <@U123> <http://x|y>` });
    expect(body).not.toMatch(/</);
    expect(body).not.toMatch(/>/);
    expect(body).toContain('&lt;!channel&gt;');
    expect(body).toContain('&lt;script&gt;');
    expect(body).toContain(`&lt;@${Z}U123&gt;`);
    expect(body).toContain(' &amp; ');
    expect(body).not.toContain('*bold*');
    expect(body).toContain(`${Z}*${Z}bold${Z}*${Z}`);
  });

  it.each(['teams', 'discord', 'mattermost'] as const)(
    '%s: backslash-escaped Markdown, reader sees the value as typed',
    (channel) => {
      const { body } = render('{{v}}', channel, { v: `${EVIL} [x](http://e) <@123> ||spoiler|| ~x~ \`code\`` });
      // Every markup character is preceded by a backslash.
      expect(body).not.toMatch(/(?<!\\)[<>*[\]|~`]/);
      expect(body).toContain('\\<!channel\\>');
      expect(body).toContain('\\*bold\\*');
      expect(body).toContain('\\<script\\>');
      expect(unescapeMarkdown(body).replace(new RegExp(Z, 'g'), '')).toBe(
        `${EVIL} [x](http://e) <@123> ||spoiler|| ~x~ \`code\``,
      );
    },
  );

  it('google_chat: no escape syntax, so markers are broken with U+200B and < cannot open a tag', () => {
    const { body } = render('{{v}}', 'google_chat', { v: `${EVIL} <users/all> _i_ ~s~` });
    expect(body).not.toMatch(/<[^\u200B]/);
    expect(body).toContain(`<${Z}users/all>`);
    expect(body).not.toContain('*bold*');
    expect(body).not.toContain('_i_');
    expect(body).not.toContain('~s~');
    expect(body.replace(new RegExp(Z, 'g'), '')).toBe(`<!channel> @everyone *bold* <script> <users/all> _i_ ~s~`);
  });

  it('telegram: plain text by default, HTML and MarkdownV2 when the connection says so', () => {
    const plain = renderMessage({ subject: '', body: '{{v}}' }, ctx({ v: EVIL }), format('telegram'));
    expect(plain.body).toBe(`<!channel> @${Z}everyone *bold* <script>`);
    const html = renderMessage(
      { subject: '', body: '<b>{{v}}</b>' },
      ctx({ v: EVIL }),
      format('telegram', { parse_mode: 'HTML' }),
    );
    expect(html.body).toBe(`<b>&lt;!channel&gt; @${Z}everyone *bold* &lt;script&gt;</b>`);
    const md = renderMessage(
      { subject: '', body: '*{{v}}*' },
      ctx({ v: 'a_b *c* [d](e). 1-2!' }),
      format('telegram', { parse_mode: 'MarkdownV2' }),
    );
    expect(md.body).toBe('*a\\_b \\*c\\* \\[d\\]\\(e\\)\\. 1\\-2\\!*');
    expect(escapeTelegram('a_b *c* `d` [e]', 'Markdown')).toBe('a\\_b \\*c\\* \\`d\\` \\[e]');
  });

  it('email: text part as typed, HTML part escapes values and the literal text, newlines become <br>', () => {
    const out = renderMessage(
      { subject: 'Re: {{v}}', body: 'Hello <team> & all\n{{v}}' },
      ctx({ v: `${EVIL}\n"q" 'a'` }),
      format('email'),
    );
    expect(out.subject).toBe(`Re: ${EVIL} "q" 'a'`);
    expect(out.body).toBe(`Hello <team> & all\n${EVIL}\n"q" 'a'`);
    expect(out.html).toBe(
      'Hello &lt;team&gt; &amp; all<br>\n&lt;!channel&gt; @everyone *bold* &lt;script&gt;<br>\n&quot;q&quot; &#39;a&#39;',
    );
    expect(out.html).not.toMatch(/<(?!br>)/);
  });

  it('webhook: values untouched (structured consumers)', () => {
    expect(render('{{v}}', 'webhook', { v: EVIL }).body).toBe(EVIL);
  });

  it('only email has an html part', () => {
    for (const c of CHANNEL_TYPES) expect(render('x', c).html === undefined).toBe(c !== 'email');
  });
});

describe('escape rules', () => {
  it('mentions: broadcasts anywhere, @name at a word start, e-mail addresses left readable', () => {
    expect(neutraliseMentions('@here x@everyone @ALL @Channel')).toBe(`@${Z}here x@${Z}everyone @${Z}ALL @${Z}Channel`);
    expect(neutraliseMentions('ping @oncall (@bob)')).toBe(`ping @${Z}oncall (@${Z}bob)`);
    expect(neutraliseMentions('alice@example.com a.b+c@d.io @ 5')).toBe('alice@example.com a.b+c@d.io @ 5');
  });

  it('slack: quote markers at a line start, underscores inside words kept', () => {
    expect(escapeSlack('> quoted\n  > again')).toBe(`${Z}&gt; quoted\n  ${Z}&gt; again`);
    expect(escapeSlack('db_primary_1 _it_ ~s~ `c`')).toBe(
      `db_primary_1 ${Z}_${Z}it${Z}_${Z} ${Z}~${Z}s${Z}~${Z} ${Z}\`${Z}c${Z}\`${Z}`,
    );
    expect(escapeSlack('a &amp; b')).toBe('a &amp;amp; b');
  });

  it('markdown: block markers only at a line start, inline markers everywhere', () => {
    expect(escapeMarkdown('# h\n- a\n+ b\n1. c\n2) d\n=== \nx # y - z 3. w')).toBe(
      '\\# h\n\\- a\n\\+ b\n1\\. c\n2\\) d\n\\=== \nx # y - z 3. w',
    );
    expect(escapeMarkdown('snake_case _em_ a\\b R&D')).toBe('snake_case \\_em\\_ a\\\\b R\\&D');
  });

  it('google chat: bullets at a line start are broken', () => {
    expect(escapeGoogleChat('- a\n  - b')).toBe(`${Z}- a\n  ${Z}- b`);
  });
});

describe('renderMessage', () => {
  it('keeps the template literal text and escapes only values', () => {
    const out = render('*Incident:* {{incident.title}} <!here>', 'slack', {}, '');
    expect(out.body).toBe(`*Incident:* ${sampleIncident().title} <!here>`);
  });

  it('unescaped tags in unvalidated text are still escaped, partials render nothing', () => {
    const out = render('{{{v}}} {{&v}} [{{>p}}]', 'slack', { v: '<!channel>' });
    expect(out.body).toBe('&lt;!channel&gt; &lt;!channel&gt; []');
  });

  it('sections make values optional; {{.}} prints the section value', () => {
    const body = '{{#eta}}ETA: {{.}}{{/eta}}{{^eta}}No ETA yet{{/eta}}';
    expect(render(body, 'webhook', { eta: '10 min' }).body).toBe('ETA: 10 min');
    expect(render(body, 'webhook', { eta: '' }).body).toBe('No ETA yet');
  });

  it('built-ins, and nothing leaks from the object prototype', () => {
    const out = render(
      '{{incident.id}} {{incident.severity}} {{execution.id}} [{{constructor}}] [{{toString}}] [{{incident.resolution_summary}}]',
      'webhook',
    );
    expect(out.body).toBe(`${sampleIncident().id} major exe_1 [] [] []`);
  });

  it('a caller variable cannot shadow the built-ins', () => {
    expect(render('{{incident.title}}', 'webhook', { incident: 'x' }).body).toBe(sampleIncident().title);
  });

  it('subjects are one line', () => {
    expect(render('b', 'slack', { v: 'a\r\nb\n\nc' }, '{{v}}').subject).toBe('a b c');
  });

  it('picks the variant for the channel; a variant without subject uses the template subject', () => {
    const t = {
      subject: 'S',
      body: 'B',
      variants: { slack: { subject: null, body: 'SB' }, email: { subject: 'ES', body: 'EB' } },
    };
    expect(sourceForChannel(t, 'slack')).toEqual({ subject: 'S', body: 'SB' });
    expect(sourceForChannel(t, 'email')).toEqual({ subject: 'ES', body: 'EB' });
    expect(sourceForChannel(t, 'discord')).toEqual({ subject: 'S', body: 'B' });
  });

  it('incident views and urls', () => {
    expect(incidentUrl(undefined, 'inc_1')).toBeNull();
    expect(incidentUrl('https://h.example/', 'inc_1')).toBe('https://h.example/v1/incidents/inc_1');
    const v = incidentView(
      {
        id: 'inc_1',
        title: 't',
        severity: 'low',
        status: 'resolved',
        description: 'd',
        impact: 'i',
        resolution_summary: 'r',
      },
      'https://h',
    );
    expect(v).toEqual({
      next_update_at: '',
      id: 'inc_1',
      title: 't',
      severity: 'low',
      status: 'resolved',
      description: 'd',
      impact: 'i',
      resolution_summary: 'r',
      url: 'https://h/v1/incidents/inc_1',
    });
  });
});

describe('defaultMessageSource', () => {
  it('carries title, severity, status, impact, description and every supplied variable', () => {
    const out = renderMessage(defaultMessageSource(), ctx({ eta: '5 min', area: 'EU', blank: '' }), format('webhook'));
    const inc = sampleIncident();
    expect(out.subject).toBe(`[major] ${inc.title}`);
    expect(out.body).toContain(inc.title);
    expect(out.body).toContain('Severity: major | Status: investigating');
    expect(out.body).toContain(`Impact: ${inc.impact}`);
    expect(out.body).toContain(inc.description);
    expect(out.body).toContain('area: EU\neta: 5 min');
    expect(out.body).not.toContain('blank');
  });

  it('leaves out empty parts and escapes like any template', () => {
    const inc = incidentView({
      id: 'inc_1',
      title: '<!here> down',
      severity: 'critical',
      status: 'identified',
      description: '',
      impact: '',
      resolution_summary: null,
    });
    const out = renderMessage(defaultMessageSource(), ctx({}, inc), format('slack'));
    expect(out.body).toBe('&lt;!here&gt; down\nSeverity: critical | Status: identified\n');
  });
});
