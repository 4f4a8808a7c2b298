import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerError } from 'smtp-server';
import { expect } from 'vitest';
import { CHILD_DEADLINE_MS, childEnv, spawnEntry, type Child } from './child.js';
import { startHerald, type ApiResponse, type TestHerald } from './herald.js';
import { testRedisUrl } from './redis.js';
import { waitFor } from './wait.js';

/**
 * The world the subscriber proofs run in (docs/subscribers.md): a real Herald whose status page
 * (a status_page connection with components) is fed through its public API, e-mail subscriptions
 * switched on by HERALD_SMTP_URL pointing at an SMTP server of the test's own, and workers as
 * child processes (`dist/main.js`, HERALD_ROLE=worker) a test may SIGKILL and restart.
 *
 * The page's public_url is an https origin nobody resolves (mails must carry https links); `local()`
 * turns such a link into the same path on the Herald under test, as a reverse proxy would.
 */

/** Where the page says it lives: the links in subscriber mail start with it. */
export const PUBLIC_ORIGIN = 'https://status.acme.test';
export const PUBLIC_URL = `${PUBLIC_ORIGIN}/status`;
/** The relay's login (HERALD_SMTP_URL carries it); a test credential, nothing real. */
export const SMTP_AUTH = { username: 'relay', password: 'relay-test-pass' } as const;
export const SMTP_FROM = 'status@acme.test';

/** The settings that switch e-mail subscriptions on, pointed at `peer`. */
export function smtpEnv(
  peer: { host: string; port: number },
  o: { rate?: number; pool?: number } = {},
): Record<string, string> {
  return {
    HERALD_SMTP_URL: `smtp://${SMTP_AUTH.username}:${SMTP_AUTH.password}@${peer.host}:${peer.port}`,
    HERALD_SMTP_FROM: `Acme Status <${SMTP_FROM}>`,
    HERALD_SMTP_RATE: String(o.rate ?? 1000),
    HERALD_SMTP_POOL: String(o.pool ?? 4),
  };
}

/** An execution's subscriber tally, as GET …/executions/{id} shows it (absent: no notice). */
export interface SubscriberTally {
  total: number;
  delivered: number;
  failed: number;
  pending: number;
  bounced: number;
  possible_duplicates: number;
  complete: boolean;
}

interface ExecutionView {
  id: string;
  status: string;
  deliveries: { id: string; status: string; action: string; connection_id: string }[];
  subscribers?: SubscriberTally;
}

export interface ImportAnswer {
  created: number;
  confirmed: number;
  unchanged: number;
  skipped: number;
  /** Requests of ≤ 10,000 rows answered 413 (then sent again in halves). */
  refusedAsTooLarge: number;
}

export interface World {
  h: TestHerald;
  /** The status_page connection. */
  pageId: string;
  title: string;
  /** Component name → id. */
  components: Record<string, string>;
  /** The template every incident of the world uses: `{{message}}`. */
  templateId: string;
  /** A link of the page (public_url…) as the same path and query on this Herald. */
  local(link: string): string;
  /** An incident affecting `componentIds` (partial outage), ready to publish. */
  incident(title: string, componentIds: string[]): Promise<string>;
  /** Executes `message` to the status page and waits until its delivery is delivered; the execution id. */
  publish(incidentId: string, message: string, publicStatus?: string): Promise<string>;
  /** Corrects (edits in place) a published execution with a new message; the correction's id, delivered. */
  correct(incidentId: string, executionId: string, message: string): Promise<string>;
  /** Retracts a published execution; the retraction's id, delivered. */
  retract(incidentId: string, executionId: string, reason: string): Promise<string>;
  execution(incidentId: string, executionId: string): Promise<ExecutionView>;
  /** Polls until the execution's subscriber tally is complete (its notices all sent); returns it. */
  subscribersDone(incidentId: string, executionId: string, timeoutMs?: number): Promise<SubscriberTally>;
  /** POST /v1/subscribers/import in chunks of at most 10,000 (the API's bound); the summed counts. */
  importEmails(emails: string[], components?: string[]): Promise<ImportAnswer>;
  close(): Promise<void>;
}

async function ok(r: Promise<ApiResponse>, status: number | number[], what: string): Promise<any> {
  const res = await r;
  if (![status].flat().includes(res.status)) throw new Error(`${what}: ${res.status} ${res.text.slice(0, 500)}`);
  return res.body;
}

/**
 * A Herald in this process (the API; its worker too unless `worker: false`), with a status page
 * titled `title` and the named components. `env` is added to the Herald's (smtpEnv() for mail).
 */
export async function startWorld(o: {
  env: Record<string, string>;
  worker: boolean;
  components: string[];
  title?: string;
}): Promise<World> {
  const title = o.title ?? 'Acme Cloud';
  const h = await startHerald(
    {
      HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
      HERALD_RATE_LIMIT: '1000000',
      HERALD_EXECUTE_RATE_LIMIT: '1000000',
      ...o.env,
    },
    { worker: o.worker },
  );
  try {
    const pageId = (
      await ok(
        h.api('POST', '/v1/connections', {
          body: {
            name: 'Status page',
            type: 'status_page',
            config: { title, public_url: PUBLIC_URL, time_zone: 'Europe/Berlin', locale: 'en' },
          },
        }),
        201,
        'the status page connection',
      )
    ).id as string;
    const components: Record<string, string> = {};
    let position = 0;
    for (const name of o.components)
      components[name] = (
        await ok(
          h.api('POST', '/v1/components', { body: { name, position: position++, status: 'operational' } }),
          201,
          `component ${name}`,
        )
      ).id as string;
    const templateId = (
      await ok(
        h.api('POST', '/v1/templates', { body: { name: 'public update', body: '{{message}}' } }),
        201,
        'the template',
      )
    ).id as string;

    const execution = async (incidentId: string, executionId: string): Promise<ExecutionView> =>
      ok(
        h.api('GET', `/v1/incidents/${incidentId}/executions/${executionId}`),
        200,
        'the execution',
      ) as Promise<ExecutionView>;

    /** Waits until every delivery of the execution is delivered (one failed fails at once). */
    const delivered = (incidentId: string, executionId: string) =>
      waitFor(
        async () => {
          const e = await execution(incidentId, executionId);
          const failed = e.deliveries.filter((d) => d.status === 'failed');
          if (failed.length > 0) throw new Error(`a delivery failed: ${JSON.stringify(failed)}`);
          return e.deliveries.length > 0 && e.deliveries.every((d) => d.status === 'delivered') ? e : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 100, what: `execution ${executionId} delivered` },
      );

    return {
      h,
      pageId,
      title,
      components,
      templateId,
      local(link) {
        if (!link.startsWith(`${PUBLIC_ORIGIN}/`)) throw new Error(`not a link of the page: ${link.slice(0, 60)}`);
        return `${h.url}${link.slice(PUBLIC_ORIGIN.length)}`;
      },
      async incident(incidentTitle, componentIds) {
        return (
          await ok(
            h.api('POST', '/v1/incidents', {
              body: {
                title: incidentTitle,
                severity: 'major',
                template_ids: [templateId],
                components: componentIds.map((id) => ({ id, status: 'partial_outage' })),
              },
            }),
            201,
            'the incident',
          )
        ).id as string;
      },
      async publish(incidentId, message, publicStatus = 'investigating') {
        const exe = await ok(
          h.api('POST', `/v1/incidents/${incidentId}/execute`, {
            body: { connection_ids: [pageId], variables: { message }, public_status: publicStatus },
          }),
          202,
          'execute',
        );
        await delivered(incidentId, exe.id as string);
        return exe.id as string;
      },
      async correct(incidentId, executionId, message) {
        const c = await ok(
          h.api('POST', `/v1/incidents/${incidentId}/executions/${executionId}/correct`, {
            body: { variables: { message } },
          }),
          202,
          'correct',
        );
        await delivered(incidentId, c.id as string);
        return c.id as string;
      },
      async retract(incidentId, executionId, reason) {
        const c = await ok(
          h.api('POST', `/v1/incidents/${incidentId}/executions/${executionId}/retract`, { body: { reason } }),
          202,
          'retract',
        );
        await delivered(incidentId, c.id as string);
        return c.id as string;
      },
      execution,
      subscribersDone: (incidentId, executionId, timeoutMs = 60_000) =>
        waitFor(
          async () => {
            const t = (await execution(incidentId, executionId)).subscribers;
            return t?.complete === true ? t : undefined;
          },
          { timeoutMs, intervalMs: 100, what: `the subscriber notices of execution ${executionId} complete` },
        ),
      async importEmails(emails, components) {
        const sum: ImportAnswer = { created: 0, confirmed: 0, unchanged: 0, skipped: 0, refusedAsTooLarge: 0 };
        let size = 10_000;
        for (let i = 0; i < emails.length;) {
          const chunk = emails.slice(i, i + size);
          const r = await h.api('POST', '/v1/subscribers/import', {
            body: {
              source: 'test',
              subscribers: chunk.map((email) => ({
                email,
                confirmed: true,
                ...(components === undefined ? {} : { components }),
              })),
            },
          });
          // The design allows 10,000 a request; a body limit below that is a finding (counted, and
          // the rest sent in halves) rather than the end of the proof the import only prepares.
          if (r.status === 413 && size > 500) {
            sum.refusedAsTooLarge++;
            size = Math.floor(size / 2);
            continue;
          }
          // The design names the counts, not the status: a 200 or a 201 both say "done".
          if (r.status !== 200 && r.status !== 201)
            throw new Error(`import of ${chunk.length} subscribers: ${r.status} ${r.text.slice(0, 500)}`);
          for (const k of ['created', 'confirmed', 'unchanged', 'skipped'] as const) sum[k] += Number(r.body[k] ?? 0);
          const errors = (r.body.errors ?? []) as unknown[];
          expect(errors, 'per-row import errors').toEqual([]);
          i += chunk.length;
        }
        return sum;
      },
      close: () => h.close(),
    };
  } catch (e) {
    await h.close();
    throw e;
  }
}

/**
 * A worker process (`dist/main.js`, HERALD_ROLE=worker) on the world's Redis prefix and secret,
 * started and running; `env` adds to it (smtpEnv() for mail). The caller stops it (stopChild) or kills it.
 */
export async function startWorker(w: World, env: Record<string, string>): Promise<Child> {
  const child = spawnEntry(
    'main',
    [],
    childEnv({
      HERALD_ROLE: 'worker',
      REDIS_URL: testRedisUrl(),
      HERALD_KEY_PREFIX: w.h.prefix,
      HERALD_SECRET_KEY: w.h.secretKey,
      HERALD_DATA_DIR: w.h.dataDir,
      HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
      LOG_LEVEL: 'info',
      ...env,
    }),
  );
  await waitFor(() => child.stdout().includes('Herald running (role worker'), {
    timeoutMs: CHILD_DEADLINE_MS,
    what: 'the worker to start',
  }).catch((e: unknown) => {
    child.proc.kill('SIGKILL');
    throw new Error(`${(e as Error).message}\n${child.stdout().slice(-3000)}\n${child.stderr().slice(-3000)}`);
  });
  return child;
}

// ---------------------------------------------------------------------------------------------
// A counting SMTP server: for thousands of mails, where the parsing peer (peers/smtp.ts) would
// spend seconds of the test's CPU in mailparser. It reads only the envelope and the header lines
// the proofs compare (Message-ID, X-Herald-Notice) and drops the rest.

export interface CountedMail {
  /** RCPT TO addresses. */
  to: string[];
  /** With its angle brackets. */
  messageId: string | null;
  notice: string | null;
  /** When the server took it (epoch ms). */
  at: number;
}

export interface CountingSmtp {
  host: string;
  port: number;
  mails: CountedMail[];
  /** Sessions that did not log in with SMTP_AUTH. */
  authFailures: number;
  close(): Promise<void>;
}

/** A header's value from a raw message (folded lines joined), or null. */
export function rawHeader(raw: string, name: string): string | null {
  const end = raw.search(/\r?\n\r?\n/);
  const head = (end < 0 ? raw : raw.slice(0, end)).replace(/\r?\n[ \t]+/g, ' ');
  const m = new RegExp(`^${name.replace(/[-]/g, '\\-')}:[ \\t]*(.*)$`, 'im').exec(head);
  return m ? m[1]!.trim() : null;
}

export async function startCountingSmtp(): Promise<CountingSmtp> {
  const mails: CountedMail[] = [];
  let authFailures = 0;
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    authOptional: false,
    logger: false,
    // The pool of every worker at once, and a few left over while a killed worker's sockets close.
    maxClients: 200,
    onAuth(auth, _session, cb) {
      if (auth.username === SMTP_AUTH.username && auth.password === SMTP_AUTH.password)
        return cb(null, { user: auth.username });
      authFailures++;
      const err: SMTPServerError = new Error('Invalid username or password');
      err.responseCode = 535;
      return cb(err);
    },
    onData(stream, session, cb) {
      // The header is all that is read; a body chunk is dropped once the blank line has passed.
      let head = '';
      let done = false;
      stream.on('data', (c: Buffer) => {
        if (done) return;
        head += c.toString('utf8');
        if (/\r?\n\r?\n/.test(head)) done = true;
      });
      stream.on('end', () => {
        mails.push({
          to: session.envelope.rcptTo.map((r) => r.address),
          messageId: rawHeader(head, 'Message-ID'),
          notice: rawHeader(head, 'X-Herald-Notice'),
          at: Date.now(),
        });
        cb();
      });
    },
  });
  server.on('error', () => undefined); // a worker killed mid-session is what these tests do
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    host: '127.0.0.1',
    port: (server.server.address() as AddressInfo).port,
    mails,
    get authFailures() {
      return authFailures;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
