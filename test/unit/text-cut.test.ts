import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ApiKey } from '../../src/domain/common/api-key.js';
import { escapeSlack } from '../../src/channels/slack/escape.js';
import type { Incident } from '../../src/domain/incident/incident.js';
import {
  cutText,
  cutTransformed,
  ELLIPSIS,
  graphemePrefix,
  hasLoneSurrogate,
  nonEmptyText,
  wellFormed,
} from '../../src/domain/common/text-cut.js';
import { truncate as channelTruncate, splitText } from '../../src/channels/common/message-text.js';
import { loadingModal, messageModal } from '../../src/slack/listeners/modals.js';
import { announcementMessage } from '../../src/slack/views/announcement.js';
import { apiKeyCreatedModal, generateApiKeyModal } from '../../src/slack/views/api-key-modals.js';
import { escapedText, option } from '../../src/slack/views/block-kit.js';
import { executeModal } from '../../src/slack/views/execute-modal.js';
import { helpMessage } from '../../src/slack/views/help.js';
import { homeView } from '../../src/slack/views/home.js';
import { incidentActions, incidentBlocks, incidentFallbackText } from '../../src/slack/views/incident.js';
import { incidentListMessage } from '../../src/slack/views/incident-list.js';
import {
  closeIncidentModal,
  createIncidentModal,
  resolveIncidentModal,
  updateIncidentModal,
} from '../../src/slack/views/incident-modals.js';
import { anIncident } from '../support/factories.js';
import { checkAnswer, checkApiCall, describeViolations } from '../support/slack-limits.js';

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
const segmentsOf = (s: string) => [...graphemes.segment(s)].map((x) => x.segment);

/** `cut` (marker removed) is a prefix of `text` made of whole graphemes of it. */
function isGraphemePrefix(cut: string, text: string): boolean {
  if (!text.startsWith(cut)) return false;
  let at = 0;
  for (const g of segmentsOf(text)) {
    if (at === cut.length) return true;
    if (at > cut.length) return false;
    at += g.length;
  }
  return at === cut.length;
}

const FAMILY = '👩‍👩‍👧‍👦';
const FLAG = '🇺🇦';
const E_ACUTE = 'e\u0301';

describe('cutText', () => {
  it('keeps what fits and marks what it cuts, on a grapheme boundary', () => {
    expect(cutText('short', 10)).toBe('short');
    expect(cutText('abcdefghij', 5)).toBe('abcd…');
    // The family emoji is 11 code units: cutting inside it would leave half a character.
    const s = `ab${FAMILY}cd`;
    for (let max = 1; max < s.length; max++) {
      const cut = cutText(s, max);
      expect(cut.length).toBeLessThanOrEqual(max);
      expect(hasLoneSurrogate(cut)).toBe(false);
      expect(cut.endsWith(ELLIPSIS)).toBe(true);
      expect(isGraphemePrefix(cut.slice(0, -1), s)).toBe(true);
    }
    expect(cutText(`${FLAG}${FLAG}${FLAG}`, 9)).toBe(`${FLAG}${FLAG}…`);
    expect(cutText(`${FLAG}${FLAG}${FLAG}`, 8)).toBe(`${FLAG}…`);
    expect(cutText(`${E_ACUTE}${E_ACUTE}${E_ACUTE}`, 4)).toBe(`${E_ACUTE}…`);
  });

  it('repairs lone surrogates instead of passing them on', () => {
    expect(wellFormed('a\uD83Db')).toBe('a\uFFFDb');
    expect(cutText('x\uDE00', 10)).toBe('x\uFFFD');
    expect(hasLoneSurrogate(cutText('\uD83D'.repeat(20), 7))).toBe(false);
  });

  it('is never empty where Slack needs text', () => {
    expect(nonEmptyText('', 10)).toBe('—');
    expect(nonEmptyText('   ', 10)).toBe('—');
    expect(nonEmptyText(FAMILY, 3).length).toBeGreaterThan(0);
  });

  it('cuts the raw value before escaping, never an entity', () => {
    const out = escapedText(`${'<'.repeat(10)}${FAMILY}`, 21);
    expect(out).toBe(`${'&lt;'.repeat(5)}…`);
    expect(cutTransformed(FAMILY.repeat(3), 15, (x) => x)).toBe(`${FAMILY}…`);
  });

  it('holds for random unicode: within the limit, whole graphemes, marked, well-formed', () => {
    fc.assert(
      fc.property(anyText(), fc.integer({ min: 1, max: 400 }), (text, max) => {
        const cut = cutText(text, max);
        expect(cut.length).toBeLessThanOrEqual(max);
        expect(hasLoneSurrogate(cut)).toBe(false);
        const clean = wellFormed(text);
        if (clean.length <= max) expect(cut).toBe(clean);
        else if (max > 1) {
          expect(cut.endsWith(ELLIPSIS)).toBe(true);
          expect(isGraphemePrefix(cut.slice(0, -1), clean.slice(0, cut.length - 1))).toBe(true);
          expect(clean.startsWith(cut.slice(0, -1))).toBe(true);
        }
        const esc = escapedText(text, max);
        expect(esc.length).toBeLessThanOrEqual(max);
        expect(hasLoneSurrogate(esc)).toBe(false);
        // What is shown is the escaped form of a prefix of the value: no entity is cut.
        if (esc.endsWith(ELLIPSIS)) expect(esc.replace(/&(lt|gt|amp);/g, '')).not.toMatch(/&[a-z]*$/);
        expect(graphemePrefix(text, max).length).toBeLessThanOrEqual(max);
      }),
      { numRuns: 300 },
    );
  });

  it('every channel cut (message-text) is grapheme-safe too', () => {
    fc.assert(
      fc.property(anyText(), fc.integer({ min: 20, max: 300 }), (text, max) => {
        const cut = channelTruncate(text, max);
        expect(cut.length).toBeLessThanOrEqual(max);
        expect(hasLoneSurrogate(cut)).toBe(false);
        for (const piece of splitText(text, max)) {
          expect(piece.length).toBeLessThanOrEqual(max);
          expect(hasLoneSurrogate(piece)).toBe(false);
        }
      }),
      { numRuns: 200 },
    );
  });
});

/** Text a user might paste: emoji sequences, flags, combining marks, Slack markup, raw lone surrogates. */
function anyText(maxLength = 260): fc.Arbitrary<string> {
  const piece = fc.oneof(
    fc.constantFrom(
      FAMILY,
      FLAG,
      E_ACUTE,
      '🧑🏽‍🚒',
      '👍🏿',
      'Z̷̢̛a̶l̸g̵o',
      '<@U0123ABC>',
      '<!channel>',
      '<https://x.test|x>',
      '&<>',
      '*_~`',
      '> quote',
      '\n',
      ' ',
      '…',
      'ǅ',
    ),
    fc.string({ unit: 'grapheme', maxLength: 8 }),
    fc.string({ unit: 'binary', maxLength: 4 }),
    fc.string({ maxLength: 12 }),
  );
  return fc.array(piece, { maxLength: Math.ceil(maxLength / 4) }).map((parts) => parts.join(''));
}

function assertValid(
  where: string,
  payload: { method?: string; answer?: unknown; args?: Record<string, unknown> },
): void {
  const found = payload.method ? checkApiCall(payload.method, payload.args ?? {}) : checkAnswer(where, payload.answer);
  if (found.length > 0) throw new Error(`${where}:\n${describeViolations(found)}`);
}

describe('every view builder, fed random unicode, stays within Slack’s limits', () => {
  const incidentArb = fc
    .record({
      title: anyText(200),
      description: fc.oneof(anyText(400), fc.constant('x'.repeat(10_000)), fc.constant(`${FAMILY}`.repeat(1000))),
      impact: anyText(300),
      resolution_summary: fc.oneof(fc.constant(null), anyText(300), fc.constant('r'.repeat(10_000))),
      name: anyText(100),
      status: fc.constantFrom('investigating', 'identified', 'monitoring', 'resolved', 'closed'),
    })
    .map((r): Incident =>
      anIncident({
        id: 'inc_01JABCDEFGHJKMNPQRSTVWXYZ0',
        title: r.title,
        description: r.description,
        impact: r.impact,
        resolution_summary: r.resolution_summary,
        status: r.status,
        created_by: { type: 'slack_user', id: 'U1', name: r.name },
      }),
    );

  it('modals, messages, the Home and answers', () => {
    fc.assert(
      fc.property(
        incidentArb,
        anyText(120),
        anyText(300),
        fc.array(anyText(100), { maxLength: 30 }),
        (inc, name, longish, names) => {
          const view = (v: unknown, where: string) => assertValid(where, { method: 'views.open', args: { view: v } });
          const message = (m: { text: string; blocks: unknown[] }, where: string) =>
            assertValid(where, { method: 'chat.postMessage', args: { channel: 'C1', ...m } });
          const templates = names.map((n, i) => ({ id: `tpl_${i}`, name: n }));
          view(createIncidentModal({ title: inc.title, templates, ctx: {} }), 'create');
          view(updateIncidentModal({ incident: inc, templates, attached: templates.slice(0, 2) }), 'update');
          view(resolveIncidentModal(inc), 'resolve');
          view(closeIncidentModal(inc), 'close');
          view(messageModal(name, longish), 'message');
          view(loadingModal(name), 'loading');
          view(generateApiKeyModal(), 'api key form');
          view(apiKeyCreatedModal({ id: 'key_1', name, token: 'hk_x' }), 'api key created');
          const variables = names.slice(0, 50).map((n, i) => ({
            name: `v${i}`,
            description: n,
            required: i % 2 === 0,
            default: i % 3 === 0 ? null : i % 3 === 1 ? n : 'd'.repeat(4000),
          }));
          const previews = names.map((n, i) => ({
            connectionName: n,
            connectionType: 'slack',
            templateName: i % 2 ? n : null,
            subject: i % 3 ? n : '',
            body: i % 4 ? longish : '',
          }));
          view(executeModal({ incident: inc, variables, previews, total: previews.length + 190 }), 'execute');
          const receipts = {
            executionId: 'exe_1',
            status: 'partially_failed' as const,
            lines: names.map((n, i) => ({
              connectionName: n,
              connectionType: 'webhook',
              status: i % 2 ? ('failed' as const) : ('delivered' as const),
              attempts: 3,
              error: longish,
            })),
          };
          message(announcementMessage(inc, receipts), 'announcement');
          message(announcementMessage(inc, null), 'announcement without receipts');
          message(incidentListMessage([inc, inc, inc], true), 'list');
          message(
            { text: incidentFallbackText(inc), blocks: [...incidentBlocks(inc), ...incidentActions(inc)] },
            'show',
          );
          message(helpMessage(), 'help');
          const key: ApiKey = {
            id: 'key_1',
            name,
            scopes: ['*'],
            prefix: 'hk_',
            last4: 'abcd',
            created_at: '2026-11-22T10:00:00.000Z',
            expires_at: null,
            revoked_at: null,
            last_used_at: null,
            created_by: { type: 'slack_user', id: 'U1', name },
          } as unknown as ApiKey;
          const connections = names.map((n, i) => ({
            id: `con_${i}`,
            name: n,
            type: 'webhook',
            enabled: i % 2 === 0,
            health: {
              state: 'degraded',
              consecutive_failures: 2,
              last_error: longish,
              disabled_reason: i % 3 ? null : longish,
            },
            last_test: null,
          }));
          assertValid('home', {
            method: 'views.publish',
            args: {
              user_id: 'U1',
              view: homeView({
                incidents: [inc, inc],
                moreIncidents: true,
                admin: { connections, moreConnections: true, keys: [key, key], moreKeys: false },
                now: new Date('2026-11-22T10:00:00.000Z'),
              }),
            },
          });
          assertValid('options', { answer: { options: names.map((n, i) => option(n, `tpl_${i}`)) } });
          assertValid('unknown command', {
            answer: { response_type: 'ephemeral', text: `I don't know \`${escapedText(name, 120)}\`.` },
          });
        },
      ),
      { numRuns: 60 },
    );
  });

  it('the validator itself refuses what Slack refuses (so the property above can fail)', () => {
    expect(
      checkApiCall('views.open', {
        view: { type: 'modal', title: { type: 'plain_text', text: 'x'.repeat(25) }, blocks: [] },
      }),
    ).toHaveLength(1);
    expect(checkApiCall('chat.postMessage', { channel: 'C', text: '' })[0]?.refusal).toBe('no_text');
    expect(
      checkApiCall('chat.postMessage', {
        channel: 'C',
        text: 'a',
        blocks: [{ type: 'section', text: { type: 'mrkdwn', text: '' } }],
      })[0]?.rule,
    ).toMatch(/empty/);
    expect(checkApiCall('chat.postMessage', { channel: 'C', text: 'a\uD83D' })[0]?.rule).toMatch(/surrogate/);
    expect(
      checkApiCall('views.open', {
        trigger_id: `${Date.now() - 3500}.1.a`,
        view: { type: 'modal', title: { type: 'plain_text', text: 'x' }, blocks: [] },
      })[0]?.refusal,
    ).toBe('expired_trigger_id');
    const opt = { text: { type: 'plain_text', text: 'o'.repeat(76) }, value: 'v' };
    expect(checkAnswer('options', { options: [opt] })).toHaveLength(1);
    const input = {
      type: 'input',
      block_id: 'b',
      label: { type: 'plain_text', text: 'L' },
      element: { type: 'plain_text_input', action_id: 'a', max_length: 3000, initial_value: 'x'.repeat(3001) },
    };
    expect(
      checkApiCall('views.open', {
        view: {
          type: 'modal',
          title: { type: 'plain_text', text: 'x' },
          submit: { type: 'plain_text', text: 'Go' },
          blocks: [input],
        },
      })[0]?.path,
    ).toMatch(/initial_value/);
    // The old cut at 75 code units split an emoji in two; the check finds it.
    expect(
      checkAnswer('options', {
        options: [{ text: { type: 'plain_text', text: `${'a'.repeat(74)}${FAMILY}`.slice(0, 75) }, value: 'v' }],
      })[0]?.rule,
    ).toMatch(/surrogate/);
    expect(escapeSlack('<')).toBe('&lt;');
  });
});
