import { randomUUID } from 'node:crypto';
import { iso } from '../domain/common/clock.js';
import {
  formatOf,
  readOnlyCheckOf,
  sendVia,
  type ConnectionTestResult,
  type DeliveryConnection,
  type TestStatus,
} from '../domain/connection/connection.js';
import { channelOf, type ChannelType } from '../channels/index.js';
import { escapeHtml } from '../channels/common/escape.js';
import { scrubSecrets } from '../channels/common/http-outcome.js';
import type { ChannelAdapter, OutboundMessage, RenderedContent, SendResult } from '../contracts/channel.js';
import type { ChannelSenders, ConnectionTester } from '../ports/index.js';
import { channelDeps, type ChannelAdapters, type ChannelSenderDeps } from './senders.js';
import { OutboundError } from './outbound/error.js';
import type { GuardedOutboundHttp } from './outbound/http.js';

/**
 * The network half of POST /v1/connections/{id}/test (the service did the rest: 404, config
 * validity, literal addresses, `needs_send_message`). First every destination of the config is
 * resolved and checked by the outbound guard — a name resolving to a non-public address answers
 * `blocked_by_policy` before anything is sent — then either the type's read-only check runs
 * (Slack `auth.test`, Discord GET webhook, Telegram `getMe`, SMTP verify) or, with sendMessage, a
 * marked "[Herald test]" message goes through the real sender.
 *
 * A delivered test message is `ok`, except where the platform only says "accepted" (a channel
 * module that `acceptsOnly`, or any 202: the platform acts later, so nobody knows yet whether it
 * posted) → `accepted_unverified`, which still counts as `ok: true`.
 */

export interface ConnectionTesterDeps extends ChannelSenderDeps {
  adapters: ChannelAdapters;
  senders: ChannelSenders;
  /** Wall clock (checked_at, Retry-After dates). */
  clock: { now(): Date };
  /** Monotonic ms for latencies. */
  monotonic?: () => number;
  /** The id a test message is sent under (its `webhook-id`, Google Chat requestId, Message-ID). */
  newTestId?: () => string;
  timeoutMs?: number;
  /**
   * The whole test's deadline (DNS, connect, TLS, the check or the test message): past it the
   * test answers `unreachable` with the reason, whatever is still pending. Default 10 s.
   */
  deadlineMs?: number;
}

export const CONNECTION_TEST_DEADLINE_MS = 10_000;

type Outcome = Omit<ConnectionTestResult, 'checked_at' | 'method' | 'sent_message'>;

export function createConnectionTester(deps: ConnectionTesterDeps): ConnectionTester {
  const monotonic = deps.monotonic ?? (() => performance.now());
  const newTestId = deps.newTestId ?? (() => `test_${randomUUID().replace(/-/g, '')}`);

  // Built once: the deps every read-only check gets (the SMTP client included).
  const checkDeps = channelDeps(deps);

  async function readOnlyCheck(conn: DeliveryConnection): Promise<{ method: string | null; outcome: Outcome }> {
    const check = checkOf(deps.adapters, conn.type);
    const answer = check === null ? null : await check(conn.config, checkDeps);
    if (answer === null) return { method: null, outcome: needsSendMessage(conn) };
    return { method: readOnlyCheckOf(conn.type, conn.config), outcome: fromResult(answer.result, answer.okDetail) };
  }

  async function sendTestMessage(conn: DeliveryConnection): Promise<Outcome> {
    const message = testMessage(conn, newTestId());
    const result = await sendVia(deps.senders, conn, message);
    // Accepted, not yet posted: the platform's delivered means only that (its module says so), or a 202.
    const unverified =
      result.outcome === 'delivered' && (channelOf(conn.type).acceptsOnly === true || result.httpStatus === 202);
    if (unverified) {
      return {
        ok: true,
        status: 'accepted_unverified',
        http_status: result.httpStatus,
        provider_code: result.providerCode,
        latency_ms: round(result.latencyMs),
        detail: 'The platform accepted the test message; it does not confirm that it was posted (check the channel).',
      };
    }
    return fromResult(result, 'The test message was delivered.');
  }

  const deadlineMs = deps.deadlineMs ?? CONNECTION_TEST_DEADLINE_MS;

  /** The test itself, without the deadline: the method tried and its outcome. */
  async function run(conn: DeliveryConnection, sendMessage: boolean): Promise<Attempt> {
    const refusal = await checkDestinations(deps.http, conn);
    if (refusal)
      return {
        method: sendMessage ? 'send_message' : readOnlyCheckOf(conn.type, conn.config),
        outcome: refusal,
        contacted: false,
      };
    if (sendMessage) return { method: 'send_message', outcome: await sendTestMessage(conn), contacted: true };
    const r = await readOnlyCheck(conn);
    return { ...r, contacted: true };
  }

  return {
    async test(conn, { sendMessage }) {
      const checkedAt = iso(deps.clock.now());
      const started = monotonic();
      const secrets = Object.values(conn.secrets);
      const { method, outcome, contacted } = await withinDeadline(conn, sendMessage, deadlineMs, () =>
        run(conn, sendMessage),
      );
      // The check's own latency when it has one; else the time taken, if anyone was contacted.
      const latency =
        outcome.latency_ms ??
        (contacted && outcome.status !== 'needs_send_message' ? Math.round(monotonic() - started) : null);
      return {
        ...outcome,
        latency_ms: latency,
        detail: scrubSecrets(outcome.detail, secrets),
        method,
        // True when a test message was delivered (or accepted): a refused one was not "sent".
        sent_message: sendMessage && outcome.ok,
        checked_at: checkedAt,
      };
    },
  };
}

/** A test's method, its outcome, and whether anyone was contacted (the time taken counts only then). */
interface Attempt {
  method: string | null;
  outcome: Outcome;
  contacted: boolean;
}

/**
 * Runs the test under the whole test's deadline. The deadline answers for whatever is still
 * pending (a resolver, a TLS handshake, an SMTP server that greets slowly); what runs on is bounded
 * by its own time-outs and is ignored.
 */
async function withinDeadline(
  conn: DeliveryConnection,
  sendMessage: boolean,
  deadlineMs: number,
  run: () => Promise<Attempt>,
): Promise<Attempt> {
  const unfinished = (outcome: Outcome): Attempt => ({
    method: sendMessage ? 'send_message' : null,
    outcome,
    contacted: true,
  });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'deadline'>((resolve) => {
    timer = setTimeout(() => resolve('deadline'), deadlineMs);
  });
  try {
    const r = await Promise.race([run(), deadline]);
    return r === 'deadline' ? unfinished(pastDeadline(conn, deadlineMs)) : r;
  } catch (e) {
    // A bug must not turn a test into a 500: report it as data, without internals.
    return unfinished({
      ok: false,
      status: 'unreachable',
      http_status: null,
      provider_code: null,
      latency_ms: null,
      detail: `the test could not run: ${(e as Error).message}`,
    });
  } finally {
    clearTimeout(timer);
  }
}

function pastDeadline(conn: DeliveryConnection, deadlineMs: number): Outcome {
  const hosts = channelOf(conn.type)
    .destinations(conn.config)
    .map((d) => d.host);
  return {
    ok: false,
    status: 'unreachable',
    http_status: null,
    provider_code: null,
    latency_ms: null,
    detail: `the test did not finish within ${deadlineMs >= 1000 ? `${Math.round(deadlineMs / 1000)} s` : `${deadlineMs} ms`} (${hosts.join(', ') || 'the destination'} did not answer in time)`,
  };
}

/** The read-only check of a type, seen through the common config type (the union widens safely). */
function checkOf(adapters: ChannelAdapters, type: ChannelType): ChannelAdapter<DeliveryConnection['config']>['check'] {
  return (adapters[type] as ChannelAdapter<DeliveryConnection['config']>).check;
}

/**
 * Resolves every destination of the config through the guard, before anything is sent. The
 * request itself is guarded again at connect time (that is what makes rebinding useless); this
 * pre-flight only lets the test say clearly why it would be refused.
 */
async function checkDestinations(http: GuardedOutboundHttp, conn: DeliveryConnection): Promise<Outcome | null> {
  for (const d of channelOf(conn.type).destinations(conn.config)) {
    try {
      if (d.kind === 'url') http.guard.checkUrl(d.value);
      await http.guard.resolve(d.host);
    } catch (e) {
      if (!(e instanceof OutboundError)) throw e;
      const status: TestStatus =
        e.kind === 'blocked_by_policy' || e.kind === 'https_required'
          ? 'blocked_by_policy'
          : e.kind === 'invalid_url'
            ? 'invalid_config'
            : 'unreachable';
      return {
        ok: false,
        status,
        http_status: null,
        provider_code: null,
        latency_ms: null,
        detail: `${d.field}: ${e.message}`,
      };
    }
  }
  return null;
}

/** A send or check result as a test outcome. */
function fromResult(result: SendResult, okDetail: string): Outcome {
  const base = {
    http_status: result.httpStatus,
    provider_code: result.providerCode,
    latency_ms: round(result.latencyMs),
  };
  if (result.outcome === 'delivered') return { ...base, ok: true, status: 'ok', detail: okDetail };
  let status: TestStatus;
  switch (result.cause) {
    case 'policy':
      status = 'blocked_by_policy';
      break;
    case 'auth':
      status = 'auth_failed';
      break;
    case 'not_found':
      status = 'not_found';
      break;
    case 'rate_limited':
      status = 'rate_limited';
      break;
    case undefined:
      // Retryable trouble is the destination being unreachable or failing now; a permanent refusal
      // of what was sent is the configuration (a redirecting URL, a refused recipient, bad input).
      status = result.outcome === 'retryable' ? 'unreachable' : 'invalid_config';
  }
  return { ...base, ok: false, status, detail: result.error };
}

function needsSendMessage(conn: DeliveryConnection): Outcome {
  return {
    ok: false,
    status: 'needs_send_message',
    http_status: null,
    provider_code: null,
    latency_ms: null,
    detail: `A ${conn.type} connection has no read-only check; send {"send_message": true} to deliver a marked test message.`,
  };
}

const round = (ms: number | null): number | null => (ms === null ? null : Math.max(0, Math.round(ms)));

const TEST_SUBJECT = 'Connection test';
const TEST_BODY = 'This is a test message from Herald to check this connection. No action is needed.';

/** The marked test message, written in the connection's format (the senders add the "[Herald test]" marker). */
export function testMessage(conn: DeliveryConnection, id: string): OutboundMessage {
  const format = formatOf(conn);
  const content: RenderedContent = format.html
    ? { subject: TEST_SUBJECT, body: TEST_BODY, html: `<p>${escapeHtml(TEST_BODY)}</p>` }
    : { subject: format.escape(TEST_SUBJECT), body: format.escape(TEST_BODY) };
  return {
    deliveryId: id,
    executionId: id,
    incident: { id: '', title: TEST_SUBJECT, severity: 'low', status: 'investigating', url: null },
    content,
    test: true,
  };
}
