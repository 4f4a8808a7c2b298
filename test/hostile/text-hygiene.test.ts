import { describe, expect, it } from 'vitest';
import { textHygieneErrors } from '../../src/domain/common/validation.js';
import { checkSlackPayload } from '../../src/slack/payload-guard.js';

describe('textHygieneErrors', () => {
  it('names the path of every bad string, keys included; free text keeps tab, LF and CRLF', () => {
    const errors = textHygieneErrors({
      title: 'a\nb',
      description: 'ok\tok\r\nok',
      impact: 'bare\rcr',
      variables: { eta: 'line\nline', bad: 'x\u0000' },
      list: ['fine', 'lone \udc00'],
      'k\u0007': 1,
    });
    expect(errors.map((e) => [e.field, e.code]).sort()).toEqual([
      ['impact', 'control_character'],
      ['k\u0007', 'control_character'],
      ['list.1', 'invalid_unicode'],
      ['title', 'control_character'],
      ['variables.bad', 'control_character'],
    ]);
    expect(textHygieneErrors({ title: 'Pager 📟 down', body: '' })).toEqual([]);
  });

  it('walks a body nested 50,000 levels deep in linear time (no stack overflow, no quadratic path copies)', () => {
    const deep = JSON.parse('['.repeat(50_000) + '"x\\u0000"' + ']'.repeat(50_000)) as unknown;
    const started = performance.now();
    const errors = textHygieneErrors(deep);
    const ms = performance.now() - started;
    expect(errors).toHaveLength(1);
    expect(errors[0]!.field.split('.')).toHaveLength(50_000);
    expect(ms).toBeLessThan(1_500);
  });

  it('reports at most 20 problems', () => {
    expect(textHygieneErrors(Array.from({ length: 500 }, () => '\u0000'))).toHaveLength(20);
  });
});

describe('checkSlackPayload', () => {
  const form = (p: unknown) => Buffer.from(`payload=${encodeURIComponent(JSON.stringify(p))}`);
  const FORM = 'application/x-www-form-urlencoded';
  const user = { id: 'U1' };

  it('passes what Herald listens to', () => {
    expect(
      checkSlackPayload(
        form({ type: 'block_actions', user, actions: [{ action_id: 'incident_close', value: 'inc_1' }] }),
        FORM,
      ).verdict,
    ).toBe('pass');
    expect(
      checkSlackPayload(
        form({
          type: 'view_submission',
          user,
          view: {
            id: 'V1',
            callback_id: 'incident_create',
            blocks: [],
            state: { values: { b: { a: { type: 'plain_text_input', value: 'x' } } } },
          },
        }),
        FORM,
      ).verdict,
    ).toBe('pass');
    expect(
      checkSlackPayload(
        Buffer.from('command=%2Fincident&text=help&user_id=U1&channel_id=C1&trigger_id=1.2'),
        `${FORM}; charset=utf-8`,
      ).verdict,
    ).toBe('pass');
    expect(
      checkSlackPayload(Buffer.from(JSON.stringify({ type: 'url_verification', challenge: 'c' })), 'application/json')
        .verdict,
    ).toBe('pass');
  });

  it('ignores well-formed kinds with no listener, refuses malformed ones', () => {
    expect(
      checkSlackPayload(form({ type: 'block_actions', user, actions: [{ action_id: 'someone_elses' }] }), FORM).verdict,
    ).toBe('ignore');
    expect(checkSlackPayload(Buffer.from('command=%2Fother&user_id=U1&channel_id=C1&trigger_id=1'), FORM).verdict).toBe(
      'ignore',
    );
    expect(
      checkSlackPayload(
        form({
          type: 'view_submission',
          user,
          view: { id: 'V1', callback_id: 'incident_create', blocks: {}, state: { values: {} } },
        }),
        FORM,
      ),
    ).toEqual({ verdict: 'malformed', reason: 'view_submission: view.blocks is not an array' });
    expect(checkSlackPayload(Buffer.from('payload=null'), FORM).verdict).toBe('malformed');
    expect(checkSlackPayload(Buffer.from([0x7b, 0xff, 0x7d]), 'application/json')).toEqual({
      verdict: 'malformed',
      reason: 'the body is not valid UTF-8',
    });
  });
});
