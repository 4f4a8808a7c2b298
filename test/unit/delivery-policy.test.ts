import { describe, expect, it } from 'vitest';
import { channelOf } from '../../src/channels/index.js';
import {
  classifyHttpStatus,
  classifySmtpCode,
  decideRetry,
  disablesConnection,
  MAX_ATTEMPTS,
  pacingFor,
  retryDelayMs,
  RETRY_WINDOW_MS,
} from '../../src/domain/execution/delivery-policy.js';
import { executionStatus } from '../../src/domain/execution/execution.js';

describe('retry policy', () => {
  it('backs off exponentially with jitter in [0.5, 1], capped at 5 minutes', () => {
    expect(retryDelayMs(1, null, () => 1)).toBe(2000);
    expect(retryDelayMs(1, null, () => 0)).toBe(1000);
    expect(retryDelayMs(3, null, () => 1)).toBe(8000);
    expect(retryDelayMs(20, null, () => 1)).toBe(300_000);
    expect(MAX_ATTEMPTS).toBe(8);
  });

  it("honours the platform's Retry-After over the backoff", () => {
    expect(retryDelayMs(1, 7000, () => 1)).toBe(7000);
  });

  it('retries up to 8 attempts within about an hour of the first', () => {
    const random = () => 1;
    expect(decideRetry({ attemptsMade: 1, retryAfterMs: null, elapsedMs: 0, random })).toEqual({
      retry: true,
      delayMs: 2000,
    });
    expect(decideRetry({ attemptsMade: 7, retryAfterMs: null, elapsedMs: 200_000, random })).toEqual({
      retry: true,
      delayMs: 128_000,
    });
    expect(decideRetry({ attemptsMade: 8, retryAfterMs: null, elapsedMs: 0, random })).toMatchObject({ retry: false });
    // The backoff alone never reaches the window (2+4+…+128 s ≈ 4 min); a long Retry-After can.
    expect(decideRetry({ attemptsMade: 2, retryAfterMs: 30 * 60_000, elapsedMs: 31 * 60_000, random })).toMatchObject({
      retry: false,
      reason: expect.stringMatching(/hour/),
    });
    expect(decideRetry({ attemptsMade: 2, retryAfterMs: 30 * 60_000, elapsedMs: 29 * 60_000, random })).toEqual({
      retry: true,
      delayMs: 30 * 60_000,
    });
    expect(RETRY_WINDOW_MS).toBe(3_600_000);
  });

  it('classifies statuses as the delivery policy says', () => {
    for (const s of [200, 201, 202, 204]) expect(classifyHttpStatus(s)).toBe('delivered');
    for (const s of [408, 425, 429, 500, 502, 503]) expect(classifyHttpStatus(s)).toBe('retryable');
    for (const s of [301, 302, 400, 401, 403, 404, 410, 413, 422]) expect(classifyHttpStatus(s)).toBe('permanent');
    expect(classifySmtpCode(250)).toBe('delivered');
    expect(classifySmtpCode(421)).toBe('retryable');
    expect(classifySmtpCode(550)).toBe('permanent');
  });

  it('disables only URL-addressed destinations on 404/410', () => {
    // Which senders are URL-addressed is each channel's (test/e2e/channels.test.ts proves it per platform).
    expect(disablesConnection(404, true)).toBe(true);
    expect(disablesConnection(410, true)).toBe(true);
    expect(disablesConnection(404, false)).toBe(false);
    expect(disablesConnection(410, false)).toBe(false);
    expect(disablesConnection(400, true)).toBe(false);
    expect(disablesConnection(500, true)).toBe(false);
  });

  it('paces per platform unless the connection overrides it', () => {
    expect(pacingFor(channelOf('slack').pacing, null)).toEqual({ perSecond: 1, burst: 1 });
    expect(pacingFor(channelOf('discord').pacing, null)).toEqual({ perSecond: 2.5, burst: 5 });
    expect(pacingFor(channelOf('slack').pacing, 120)).toEqual({ perSecond: 2, burst: 1 });
  });
});

describe('execution status', () => {
  const of = (...s: ('queued' | 'sending' | 'delivered' | 'retrying' | 'failed' | 'cancelled')[]) =>
    executionStatus(s.map((status) => ({ status })));
  it('is derived from the deliveries', () => {
    expect(of('queued', 'queued')).toBe('queued');
    expect(of('queued', 'delivered')).toBe('in_progress');
    expect(of('retrying')).toBe('in_progress');
    expect(of('delivered', 'delivered')).toBe('delivered');
    expect(of('delivered', 'failed')).toBe('partially_failed');
    expect(of('failed', 'failed')).toBe('failed');
    expect(of('cancelled')).toBe('cancelled');
    expect(of('failed', 'cancelled')).toBe('failed');
  });
});
