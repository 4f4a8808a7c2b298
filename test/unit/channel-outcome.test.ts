import { describe, expect, it } from 'vitest';
import {
  fromHttpStatus,
  fromOutboundError,
  parseRetryAfter,
  scrubResult,
} from '../../src/channels/common/http-outcome.js';
import { safeSlice, splitText, subjectOf, truncate } from '../../src/channels/common/message-text.js';
import { OutboundError } from '../../src/delivery/outbound/error.js';
import type { OutboundResponse } from '../../src/delivery/outbound/http.js';
import { messageOf } from '../support/delivery-targets.js';

const res = (status: number, headers: Record<string, string> = {}): OutboundResponse => ({
  status,
  headers,
  body: '',
  truncated: false,
  latencyMs: 12,
});
const now = Date.parse('2026-11-22T10:00:00.000Z');

describe('parseRetryAfter', () => {
  it('reads seconds, decimals and HTTP dates; ignores garbage', () => {
    expect(parseRetryAfter('3', now)).toBe(3000);
    expect(parseRetryAfter('0.25', now)).toBe(250);
    expect(parseRetryAfter('Sun, 22 Nov 2026 10:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Sun, 22 Nov 2026 09:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeNull();
    expect(parseRetryAfter(undefined, now)).toBeNull();
  });
});

describe('fromHttpStatus', () => {
  const read = (
    status: number,
    type: 'webhook' | 'slack' | 'telegram' = 'webhook',
    headers: Record<string, string> = {},
    slackWebhookMode = false,
  ) =>
    fromHttpStatus(res(status, headers), {
      urlAddressed: type === 'webhook' || (type === 'slack' && slackWebhookMode),
      who: 'example.com',
      nowMs: now,
    });

  it('2xx delivered; 408/425/429/5xx retryable; 3xx and other 4xx permanent', () => {
    expect(read(204)).toMatchObject({ outcome: 'delivered', httpStatus: 204, latencyMs: 12 });
    for (const s of [408, 425, 429, 500, 503]) expect(read(s).outcome).toBe('retryable');
    for (const s of [301, 400, 401, 403, 413, 422]) expect(read(s).outcome).toBe('permanent');
    expect(read(504)).toMatchObject({ outcome: 'retryable', ambiguous: true });
    expect(read(503)).toMatchObject({ outcome: 'retryable', ambiguous: false });
  });

  it('404/410 disable URL-addressed types only (Slack: webhook mode only)', () => {
    expect(read(404)).toMatchObject({ outcome: 'permanent', disable: expect.stringContaining('no longer exists') });
    expect(read(410, 'slack', {}, true)).toMatchObject({ disable: expect.any(String) });
    expect(read(404, 'slack')).toMatchObject({ outcome: 'permanent', disable: null });
    expect(read(404, 'telegram')).toMatchObject({ outcome: 'permanent', disable: null });
  });

  it('honours Retry-After, and gives up on a wait longer than Herald retries', () => {
    expect(read(429, 'webhook', { 'retry-after': '12' })).toMatchObject({
      outcome: 'retryable',
      retryAfterMs: 12_000,
      cause: 'rate_limited',
    });
    expect(read(503, 'webhook', { 'retry-after': String(2 * 3600) })).toMatchObject({
      outcome: 'permanent',
      disable: null,
    });
  });
});

describe('fromOutboundError', () => {
  it('maps refusals and redirects to permanent, network trouble to retryable (ambiguous once sent)', () => {
    expect(fromOutboundError(new OutboundError('blocked_by_policy', '10.0.0.1 is private'))).toMatchObject({
      outcome: 'permanent',
      cause: 'policy',
      disable: null,
    });
    expect(fromOutboundError(new OutboundError('redirect', 'moved', { httpStatus: 301 }))).toMatchObject({
      outcome: 'permanent',
      httpStatus: 301,
    });
    expect(fromOutboundError(new OutboundError('connection_refused', 'refused'))).toMatchObject({
      outcome: 'retryable',
      ambiguous: false,
    });
    expect(fromOutboundError(new OutboundError('timeout', 'slow', { sent: true }))).toMatchObject({
      outcome: 'retryable',
      ambiguous: true,
    });
  });
});

describe('scrubResult', () => {
  it('removes secret values a platform echoed back', () => {
    const r = scrubResult(
      {
        outcome: 'permanent',
        httpStatus: 400,
        providerCode: null,
        latencyMs: 1,
        error: 'bad token xoxb-123456',
        disable: null,
      },
      ['xoxb-123456'],
    );
    expect(r.outcome === 'permanent' && r.error).toBe('bad token [secret]');
  });
});

describe('message text', () => {
  it('truncate keeps the limit, ends with the marker and never splits a surrogate pair', () => {
    expect(truncate('short', 10)).toBe('short');
    const cut = truncate('a'.repeat(50), 20);
    expect(cut).toHaveLength(20);
    expect(cut.endsWith('… (truncated)')).toBe(true);
    expect(safeSlice('ab😀', 3)).toBe('ab');
  });

  it('splitText breaks at paragraph, line or word boundaries within the limit', () => {
    const text = `${'a'.repeat(60)}\n\n${'b'.repeat(60)} ${'c'.repeat(30)}`;
    const pieces = splitText(text, 80);
    expect(pieces).toEqual(['a'.repeat(60), `${'b'.repeat(60)} ${'c'.repeat(30)}`.slice(0, 60), 'c'.repeat(30)]);
    for (const p of splitText('x'.repeat(250), 100)) expect(p.length).toBeLessThanOrEqual(100);
  });

  it('marks test subjects', () => {
    expect(subjectOf(messageOf({ subject: 'Hi', test: true }))).toBe('[Herald test] Hi');
    expect(subjectOf(messageOf({ subject: 'Hi' }))).toBe('Hi');
  });
});
