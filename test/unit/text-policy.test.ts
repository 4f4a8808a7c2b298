import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { ApiKeyCreateSchema } from '../../src/domain/common/api-key.js';
import { isDomainError } from '../../src/domain/common/errors.js';
import { codePointLabel, textViolation, type TextKind } from '../../src/domain/common/text-policy.js';
import { safeParseInput, textHygieneErrors, toFieldErrors } from '../../src/domain/common/validation.js';
import { parseConnectionCreate } from '../../src/domain/connection/connection.js';
import { CorrectRequestSchema, RetractRequestSchema } from '../../src/domain/execution/conversation.js';
import { ExecuteRequestSchema } from '../../src/domain/execution/execution.js';
import { IncidentCreateSchema, IncidentPatchSchema } from '../../src/domain/incident/incident.js';
import { TemplateCreateSchema } from '../../src/domain/template/template.js';

/**
 * The text policy (src/domain/common/text-policy.ts), property by property: what each kind of
 * field refuses wherever it sits in the text, what it keeps, and that every request schema's text
 * fields — the API's, the Slack submissions' (the same services) and the connection configs' —
 * follow it through the shared validation, naming the field and the code point.
 */

const range = (from: number, to: number): string[] =>
  Array.from({ length: to - from + 1 }, (_, i) => String.fromCharCode(from + i));

/** Refused in every field. */
const ALWAYS_REFUSED = [
  ...range(0x00, 0x08),
  '\u000B',
  '\u000C',
  ...range(0x0e, 0x1f),
  '\u007F',
  ...range(0x80, 0x9f),
  '\uFEFF',
  '\uD800',
  '\uDBFF',
  '\uDC00',
  '\uDFFF',
];
/** Refused in one-line fields only: tab, line breaks, separators and the bidi controls. */
const ONE_LINE_ONLY = ['\t', '\n', '\r', '\u2028', '\u2029', ...range(0x202a, 0x202e), ...range(0x2066, 0x2069)];

/** What text is made of and every field keeps: letters, accents, emoji with ZWJ and skin tones, CJK, NBSP inside. */
const KEPT_UNITS = [
  ...range(0x20, 0x7e),
  'é',
  'ü',
  'e\u0301',
  'ß',
  'Ω',
  '中',
  'ש',
  '\u00A0',
  '\u200D',
  '\u200E',
  '\u200F',
  '\uFE0F',
  '👩‍💻',
  '👍🏽',
  '🇫🇷',
  '📟',
];
const kept = fc.string({ unit: fc.constantFrom(...KEPT_UNITS), maxLength: 40 });
/** Free text keeps line breaks too (LF, CRLF, tab, U+2028). */
const keptFree = fc.string({ unit: fc.constantFrom(...KEPT_UNITS, '\n', '\r\n', '\t', '\u2028'), maxLength: 40 });

/** `text` with `bad` inserted at a position chosen by `at` (0..1). */
const insert = (text: string, bad: string, at: number): string => {
  const units = Array.from(text);
  const i = Math.min(units.length, Math.floor(at * (units.length + 1)));
  return [...units.slice(0, i), bad, ...units.slice(i)].join('');
};
const position = fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true });

describe('textViolation', () => {
  const kinds: [TextKind, string[]][] = [
    ['one_line', [...ALWAYS_REFUSED, ...ONE_LINE_ONLY]],
    ['free_text', [...ALWAYS_REFUSED, '\r']],
  ];
  for (const [kind, refused] of kinds) {
    it(`${kind}: a refused character anywhere is found, named as U+XXXX at its position`, () => {
      fc.assert(
        fc.property(kind === 'one_line' ? kept : keptFree, fc.constantFrom(...refused), position, (text, bad, at) => {
          // A bare CR in free text is refused only when no LF follows it.
          const withBad = insert(text, bad, at);
          const v = textViolation(withBad, kind);
          if (bad === '\r' && kind === 'free_text' && /\r(?!\n)/.exec(withBad) === null) return;
          expect(v).not.toBeNull();
          const label = codePointLabel(v!.codePoint);
          expect(v!.message).toContain(label);
          expect(v!.message).toContain(`at character ${v!.position}`);
          // The one reported is the first offending code point.
          expect(Array.from(withBad)[v!.position - 1]!.charCodeAt(0)).toBe(v!.codePoint);
        }),
        { numRuns: 400 },
      );
    });
  }

  it('keeps what text is made of: emoji and their ZWJ sequences, accents, NBSP, LRM/RLM; free text keeps its line breaks', () => {
    fc.assert(
      fc.property(kept, (text) => {
        expect(textViolation(text, 'one_line')).toBeNull();
        expect(textViolation(text, 'free_text')).toBeNull();
      }),
    );
    fc.assert(
      fc.property(keptFree, (text) => {
        expect(textViolation(text, 'free_text')).toBeNull();
      }),
    );
    expect(textViolation('Fix at 15:00.\r\nThen ‮ mirrored ‬ and ⁧isolated⁩.', 'free_text')).toBeNull();
  });

  it('names the classic ones', () => {
    expect(textViolation('a\u007Fb', 'one_line')).toMatchObject({ code: 'control_character', codePoint: 0x7f });
    expect(textViolation('a\u009Bb', 'free_text')?.message).toContain('U+009B (CONTROL SEQUENCE INTRODUCER)');
    expect(textViolation('title\u2028', 'one_line')?.message).toContain('U+2028 (LINE SEPARATOR) at character 6');
    expect(textViolation('\uFEFFtitle', 'one_line')).toMatchObject({ code: 'invisible_character', position: 1 });
    expect(textViolation('👩‍💻\uD800', 'free_text')).toMatchObject({ code: 'invalid_unicode', position: 4 });
  });
});

/** A valid body for each request, with one text field to vary. */
interface TextField {
  what: string;
  kind: TextKind;
  /** The field's path in errors[]. */
  field: string;
  /** Runs the shared validation on a body whose field holds `value`; the field errors, [] when accepted. */
  errorsFor(value: string): { field: string; code: string; message: string }[];
}

const viaSchema =
  (schema: z.ZodType, body: (v: string) => unknown) =>
  (value: string): { field: string; code: string; message: string }[] => {
    const r = safeParseInput(schema, body(value));
    return r.success ? [] : toFieldErrors(r.error.issues);
  };

const viaConnection =
  (body: (v: string) => unknown) =>
  (value: string): { field: string; code: string; message: string }[] => {
    try {
      parseConnectionCreate(body(value));
      return [];
    } catch (e) {
      if (!isDomainError(e)) throw e;
      return e.errors;
    }
  };

const slackConfig = (over: Record<string, string>) => ({
  name: 'Ops',
  type: 'slack',
  config: { bot_token: 'xoxb-1', channel: 'C1', ...over },
});

const FIELDS: TextField[] = [
  {
    what: 'incident title',
    kind: 'one_line',
    field: 'title',
    errorsFor: viaSchema(IncidentCreateSchema, (v) => ({ title: `T${v}`, severity: 'major' })),
  },
  {
    what: 'incident description',
    kind: 'free_text',
    field: 'description',
    errorsFor: viaSchema(IncidentCreateSchema, (v) => ({ title: 'T', severity: 'major', description: v })),
  },
  {
    what: 'incident impact',
    kind: 'free_text',
    field: 'impact',
    errorsFor: viaSchema(IncidentCreateSchema, (v) => ({ title: 'T', severity: 'major', impact: v })),
  },
  {
    what: 'resolution summary',
    kind: 'free_text',
    field: 'resolution_summary',
    errorsFor: viaSchema(IncidentPatchSchema, (v) => ({ resolution_summary: v })),
  },
  {
    what: 'template name',
    kind: 'one_line',
    field: 'name',
    errorsFor: viaSchema(TemplateCreateSchema, (v) => ({ name: `N${v}`, body: 'b' })),
  },
  {
    what: 'template subject',
    kind: 'one_line',
    field: 'subject',
    errorsFor: viaSchema(TemplateCreateSchema, (v) => ({ name: 'N', subject: v, body: 'b' })),
  },
  {
    what: 'template body',
    kind: 'free_text',
    field: 'body',
    errorsFor: viaSchema(TemplateCreateSchema, (v) => ({ name: 'N', body: `b${v}` })),
  },
  {
    what: 'variable value at execute',
    kind: 'free_text',
    field: 'variables.eta',
    errorsFor: viaSchema(ExecuteRequestSchema, (v) => ({ variables: { eta: v } })),
  },
  {
    what: 'correction note',
    kind: 'free_text',
    field: 'note',
    errorsFor: viaSchema(CorrectRequestSchema, (v) => ({ note: `n${v}` })),
  },
  {
    what: 'retraction reason',
    kind: 'free_text',
    field: 'reason',
    errorsFor: viaSchema(RetractRequestSchema, (v) => ({ reason: `r${v}` })),
  },
  {
    what: 'API key name',
    kind: 'one_line',
    field: 'name',
    errorsFor: viaSchema(ApiKeyCreateSchema, (v) => ({ name: `k${v}`, scopes: ['incidents:read'] })),
  },
  {
    what: 'connection name',
    kind: 'one_line',
    field: 'name',
    errorsFor: viaConnection((v) => ({ ...slackConfig({}), name: `Ops${v}` })),
  },
  {
    what: 'connection config (Google Chat thread_key)',
    kind: 'one_line',
    field: 'config.thread_key',
    errorsFor: viaConnection((v) => ({
      name: 'G',
      type: 'google_chat',
      config: { webhook_url: 'https://chat.googleapis.com/v1/spaces/x/messages', thread_key: `k${v}` },
    })),
  },
  {
    what: 'connection config (Slack username)',
    kind: 'one_line',
    field: 'config.username',
    errorsFor: viaConnection((v) => slackConfig({ username: `bot${v}` })),
  },
];

describe('every text field follows the policy through the shared validation', () => {
  for (const f of FIELDS) {
    it(`${f.what} (${f.kind}): refused with the field and the code point named; accepted without`, () => {
      const refused = f.kind === 'one_line' ? [...ALWAYS_REFUSED, ...ONE_LINE_ONLY] : ALWAYS_REFUSED;
      fc.assert(
        fc.property(kept, fc.constantFrom(...refused), position, (text, bad, at) => {
          const errors = f.errorsFor(insert(text, bad, at));
          const mine = errors.filter((e) => e.field === f.field);
          expect(mine.length, JSON.stringify(errors)).toBeGreaterThan(0);
          expect(mine[0]!.code).toMatch(/^(control_character|invisible_character|invalid_unicode)$/);
          expect(mine[0]!.message).toContain(codePointLabel(bad.charCodeAt(0)));
        }),
        { numRuns: 150 },
      );
      // Emoji, accents and NBSP inside are text: no error about them (a blank one-line field may
      // be refused as required, which is not the policy's).
      fc.assert(
        fc.property(kept, (text) => {
          const errors = f.errorsFor(`x${text}x`).filter((e) => e.field === f.field);
          expect(errors).toEqual([]);
        }),
        { numRuns: 100 },
      );
    });
  }

  it('the body walk agrees: DEL, C1 and U+2028 in a title, U+FEFF anywhere, keys included', () => {
    const errors = textHygieneErrors({
      title: 'Down\u007F',
      name: '\u009B31m',
      subject: 'a\u2028b',
      description: 'ok\u2028ok\u200D',
      body: 'bom\uFEFF',
      variables: { eta: 'x\u0085' },
    });
    expect(errors.map((e) => e.field).sort()).toEqual(['body', 'name', 'subject', 'title', 'variables.eta']);
    expect(errors.find((e) => e.field === 'title')!.message).toContain('U+007F');
  });
});

/** Unicode spaces and invisibles that `String.prototype.trim()` (and so zod's `.trim()` and `z.url()`) removes. */
const TRIMMED_BY_JS = [
  ' ',
  '\t',
  '\n',
  '\r',
  '\u000B',
  '\u000C',
  '\u00A0',
  '\u1680',
  ...range(0x2000, 0x200a),
  '\u2028',
  '\u2029',
  '\u202F',
  '\u205F',
  '\u3000',
  '\uFEFF',
];

interface StrictField {
  what: string;
  field: string;
  valid: string;
  body: (v: string) => unknown;
  /** The refusal shows the code point (URLs and tokens); a host or an address is refused by its own shape. */
  showsCodePoint?: false;
}

const EMAIL = {
  host: 'smtp.example.com',
  port: 587,
  security: 'starttls',
  from: 'alerts@example.com',
  to: ['ops@example.com'],
};

const STRICT_FIELDS: StrictField[] = [
  {
    what: 'webhook url',
    field: 'config.url',
    valid: 'https://hooks.example.com/in',
    body: (v) => ({ name: 'W', type: 'webhook', config: { url: v } }),
  },
  {
    what: 'Slack webhook_url',
    field: 'config.webhook_url',
    valid: 'https://hooks.slack.com/services/T/B/x',
    body: (v) => ({ name: 'S', type: 'slack', config: { webhook_url: v } }),
  },
  {
    what: 'Teams webhook_url',
    field: 'config.webhook_url',
    valid: 'https://example.webhook.office.com/workflows/x',
    body: (v) => ({ name: 'T', type: 'teams', config: { webhook_url: v } }),
  },
  {
    what: 'Discord avatar_url',
    field: 'config.avatar_url',
    valid: 'https://cdn.example.com/a.png',
    body: (v) => ({
      name: 'D',
      type: 'discord',
      config: { webhook_url: 'https://discord.com/api/webhooks/1/x', avatar_url: v },
    }),
  },
  {
    what: 'Mattermost webhook_url',
    field: 'config.webhook_url',
    valid: 'https://mm.example.com/hooks/x',
    body: (v) => ({ name: 'M', type: 'mattermost', config: { webhook_url: v } }),
  },
  {
    what: 'Google Chat webhook_url',
    field: 'config.webhook_url',
    valid: 'https://chat.googleapis.com/v1/spaces/x/messages?key=k',
    body: (v) => ({ name: 'G', type: 'google_chat', config: { webhook_url: v } }),
  },
  {
    what: 'Slack bot_token',
    field: 'config.bot_token',
    valid: 'xoxb-123-abc',
    body: (v) => ({ name: 'S', type: 'slack', config: { bot_token: v, channel: 'C1' } }),
  },
  {
    what: 'Telegram bot_token',
    field: 'config.bot_token',
    valid: '123456:ABCdefghijklmnopqrstuvwxyz_-',
    body: (v) => ({ name: 'T', type: 'telegram', config: { bot_token: v, chat_id: '-100123' } }),
  },
  {
    what: 'e-mail host',
    field: 'config.host',
    valid: 'smtp.example.com',
    body: (v) => ({ name: 'E', type: 'email', config: { ...EMAIL, host: v } }),
    showsCodePoint: false,
  },
  {
    what: 'e-mail from',
    field: 'config.from',
    valid: 'Herald <alerts@example.com>',
    body: (v) => ({ name: 'E', type: 'email', config: { ...EMAIL, from: v } }),
    showsCodePoint: false,
  },
];

describe('URLs and tokens are refused, never trimmed', () => {
  for (const f of STRICT_FIELDS) {
    it(`${f.what}: leading or trailing Unicode spaces and invisibles → refused, naming the field`, () => {
      const errorsFor = viaConnection(f.body);
      expect(errorsFor(f.valid)).toEqual([]);
      fc.assert(
        fc.property(
          fc.array(fc.constantFrom(...TRIMMED_BY_JS), { minLength: 0, maxLength: 3 }),
          fc.array(fc.constantFrom(...TRIMMED_BY_JS), { minLength: 0, maxLength: 3 }),
          (lead, trail) => {
            fc.pre(lead.length + trail.length > 0);
            const errors = errorsFor(`${lead.join('')}${f.valid}${trail.join('')}`);
            const mine = errors.filter((e) => e.field === f.field);
            expect(mine.length, JSON.stringify(errors)).toBeGreaterThan(0);
            if (f.showsCodePoint !== false) expect(mine[0]!.message).toMatch(/U\+[0-9A-F]{4}/);
          },
        ),
        { numRuns: 120 },
      );
    });
  }
});
