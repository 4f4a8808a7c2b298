import { createHmac, timingSafeEqual } from 'node:crypto';
import { startHttpSink, type HttpSink, type RecordedRequest, type ScriptedReply } from './http-sink.js';

/**
 * A receiver of Standard Webhooks (standardwebhooks.com) on loopback. It verifies every request
 * independently of Herald's signer — the test oracle for `webhook-id`, `webhook-timestamp` and
 * `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed by the
 * base64-decoded part of the `whsec_…` secret — and records the verdict on each request.
 * Verified requests get 200 (or the script); unverified ones get 401 unless `acceptUnverified`.
 */

export type VerifyFailure = 'no_secret' | 'missing_headers' | 'stale_timestamp' | 'bad_signature';

export interface WebhookVerdict {
  verified: boolean;
  verifyError: VerifyFailure | null;
  webhookId: string | null;
  /** Another verified request already carried this webhook-id (a retry or a duplicate). */
  duplicate: boolean;
}

export type WebhookRequest = RecordedRequest & WebhookVerdict;

export interface WebhookReceiver {
  url: string;
  requests: WebhookRequest[];
  /** Sets the signing secret (`whsec_…`), e.g. once the connection's create response showed it. */
  setSecret(secret: string): void;
  script(...replies: ScriptedReply[]): void;
  waitForRequests: HttpSink<WebhookVerdict>['waitForRequests'];
  clear(): void;
  close(): Promise<void>;
}

export interface WebhookReceiverOptions {
  secret?: string;
  /** Allowed clock difference for webhook-timestamp (default 5 minutes, as the spec suggests). */
  toleranceSeconds?: number;
  /** Answer unverified requests like verified ones instead of 401. */
  acceptUnverified?: boolean;
  /** Answer each request only after this long (a receiver slower than loopback). */
  delayMs?: number;
}

const keyOf = (secret: string): Buffer =>
  Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');

/** Signs like a Standard Webhooks sender (for tests that need a correct or a wrong signature). */
export function signStandardWebhook(secret: string, id: string, timestamp: number | string, body: string): string {
  return `v1,${createHmac('sha256', keyOf(secret)).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

const header = (req: RecordedRequest, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

export async function startWebhookReceiver(opts: WebhookReceiverOptions = {}): Promise<WebhookReceiver> {
  let secret = opts.secret;
  const tolerance = opts.toleranceSeconds ?? 300;
  const seen = new Set<string>();

  const verify = (req: RecordedRequest): WebhookVerdict => {
    const id = header(req, 'webhook-id') ?? null;
    const ts = header(req, 'webhook-timestamp');
    const sigs = header(req, 'webhook-signature');
    const verdict = (verifyError: VerifyFailure | null): WebhookVerdict => {
      const verified = verifyError === null;
      const duplicate = verified && id !== null && seen.has(id);
      if (verified && id !== null) seen.add(id);
      return { verified, verifyError, webhookId: id, duplicate };
    };
    if (secret === undefined) return verdict('no_secret');
    if (id === null || ts === undefined || sigs === undefined || !/^\d+$/.test(ts)) return verdict('missing_headers');
    if (Math.abs(Date.now() / 1000 - Number(ts)) > tolerance) return verdict('stale_timestamp');
    const expected = Buffer.from(signStandardWebhook(secret, id, ts, req.rawBody).slice(3), 'base64');
    // The header may carry several space-separated signatures (key rotation); one match suffices.
    const ok = sigs.split(' ').some((s) => {
      const [version, sig] = s.split(',', 2);
      if (version !== 'v1' || sig === undefined) return false;
      const given = Buffer.from(sig, 'base64');
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
    return verdict(ok ? null : 'bad_signature');
  };

  const sink = await startHttpSink<WebhookVerdict>({
    annotate: verify,
    respond: (req) => ({
      ...(req.verified || opts.acceptUnverified
        ? { status: 200, body: { received: true } }
        : { status: 401, body: { error: req.verifyError } }),
      delayMs: opts.delayMs,
    }),
  });
  return {
    url: sink.url,
    requests: sink.requests,
    setSecret(s) {
      secret = s;
    },
    script: (...r) => sink.script(...r),
    waitForRequests: (n, t) => sink.waitForRequests(n, t),
    clear() {
      sink.clear();
      seen.clear();
    },
    close: () => sink.close(),
  };
}
