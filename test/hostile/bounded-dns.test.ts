import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import { createChannelSenders, loadChannelAdapters } from '../../src/delivery/senders.js';
import { createSmtpClient } from '../../src/channels/email/send.js';
import { createConnectionTester } from '../../src/delivery/connection-tester.js';
import { OutboundError } from '../../src/delivery/outbound/error.js';
import { createBoundedResolver, DnsError, OutboundGuard, type Resolver } from '../../src/delivery/outbound/guard.js';
import { createOutboundHttp } from '../../src/delivery/outbound/http.js';
import type { DeliveryConnection } from '../../src/domain/connection/connection.js';
import { startDnsServer, type DnsServer } from '../support/dns-server.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { createSelfSignedCert } from '../support/peers/self-signed-cert.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/peers/webhook-receiver.js';
import { Starvation } from '../support/starvation.js';
import { waitFor } from '../support/wait.js';

/**
 * Bounded DNS (docs/explanation/delivery-semantics.md "Outbound safety"): user-supplied names are resolved by c-ares
 * with time-outs and a deadline, against a local DNS server that answers some names, drops the
 * queries for others and delays a few. The SSRF checks still apply to every resolved address,
 * and slow or silent DNS for some destinations does not hold up the others.
 */
let dns: DnsServer;

beforeAll(async () => {
  dns = await startDnsServer((name, type) => {
    if (name.startsWith('drop')) return { drop: true };
    if (name.startsWith('v6drop.')) return type === 'AAAA' ? { drop: true } : { answer: ['127.0.0.1'] };
    if (name.startsWith('slow.')) return { answer: ['127.0.0.1'], delayMs: 600 };
    if (name.startsWith('private.')) return { answer: ['10.1.2.3'] };
    if (name.startsWith('metadata.')) return { answer: ['169.254.169.254'] };
    if (name.startsWith('mixed.')) return { answer: ['93.184.215.14', '127.0.0.1'] };
    if (name.startsWith('public.')) return { answer: ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'] };
    if (name.endsWith('.ok.test') || name === 'sink.test') return { answer: ['127.0.0.1'] };
    return { nxdomain: true };
  });
});

afterAll(async () => {
  await dns?.close();
});

const resolverFor = (opts: { deadlineMs?: number; timeoutMs?: number } = {}): Resolver =>
  createBoundedResolver({ servers: [dns.address], timeoutMs: 200, tries: 2, ...opts });

/** `p`'s outcome, how long it took and when it began and ended (performance.now()). */
async function timed<T>(
  p: Promise<T>,
): Promise<{ value?: T; error?: unknown; ms: number; started: number; ended: number }> {
  const started = performance.now();
  const done = (outcome: { value?: T; error?: unknown }) => {
    const ended = performance.now();
    return { ...outcome, ms: ended - started, started, ended };
  };
  try {
    return done({ value: await p });
  } catch (error) {
    return done({ error });
  }
}

describe('the bounded resolver', () => {
  it('answers A and AAAA from the configured server', async () => {
    const r = resolverFor();
    expect(await r('public.example.test')).toEqual([
      { address: '93.184.215.14', family: 4 },
      { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 },
    ]);
    expect(await r('Hook.OK.test.')).toEqual([{ address: '127.0.0.1', family: 4 }]);
  });

  it('a dropped name fails at the deadline as a DNS time-out, and the queries are cancelled', async () => {
    const r = await timed(resolverFor({ deadlineMs: 700 })('drop-1.bad.test'));
    expect(r.error).toBeInstanceOf(DnsError);
    expect((r.error as DnsError).reason).toBe('timeout');
    expect(r.ms).toBeGreaterThanOrEqual(150); // it waited (c-ares retries), unlike an NXDOMAIN
    expect(r.ms).toBeLessThan(3_000);
  });

  it('NXDOMAIN is not_found at once; a delayed answer inside the deadline is an answer', async () => {
    const nx = await timed(resolverFor()('nowhere.test'));
    expect((nx.error as DnsError).reason).toBe('not_found');
    expect(nx.ms).toBeLessThan(1_000);
    // 600 ms: slower than one 200 ms try, so with the default 1 s try it is still an answer.
    const slow = await timed(resolverFor({ deadlineMs: 3_000, timeoutMs: 1_000 })('slow.ok.test'));
    expect(slow.value).toEqual([{ address: '127.0.0.1', family: 4 }]);
  });

  it('one family answered: a dropped AAAA does not hold the answer until the deadline', async () => {
    // c-ares alone would give up on the AAAA query only after 1 s + 2 s.
    const r = await timed(resolverFor({ deadlineMs: 5_000, timeoutMs: 1_000 })('v6drop.ok.test'));
    expect(r.value).toEqual([{ address: '127.0.0.1', family: 4 }]);
    expect(r.ms).toBeLessThan(2_000);
  });

  it('localhost is loopback without asking DNS; /etc/hosts is not read for other names', async () => {
    const before = dns.queries.size;
    expect(await resolverFor()('localhost')).toEqual([
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
    ]);
    expect(await resolverFor()('api.localhost')).toHaveLength(2);
    expect(dns.queries.size).toBe(before);
  });

  it('40 names whose queries are dropped do not slow down 40 healthy ones', async () => {
    const r = resolverFor({ deadlineMs: 3_000, timeoutMs: 1_000 });
    const started = performance.now();
    const bad = Array.from({ length: 40 }, (_, i) => timed(r(`drop-${i}.many.test`)));
    await new Promise((res) => setTimeout(res, 50)); // the bad ones are in flight first
    const good = await Promise.all(Array.from({ length: 40 }, (_, i) => timed(r(`h${i}.ok.test`))));
    const goodDone = performance.now() - started;
    for (const g of good) expect(g.value).toEqual([{ address: '127.0.0.1', family: 4 }]);
    const badResults = await Promise.all(bad);
    for (const b of badResults) {
      expect((b.error as DnsError).reason).toBe('timeout');
      expect(b.ms).toBeLessThan(6_000);
    }
    // Not held behind them: every healthy name answered before the first dropped one gave up.
    expect(goodDone).toBeLessThan(Math.min(...badResults.map((b) => b.ms)));
  });
});

describe('the guard on resolved addresses', () => {
  const allowLoopback = OutboundAllow.parse(['127.0.0.1/32']);

  it.each([
    ['private.x.test', /10\.1\.2\.3 is a private address/],
    ['metadata.x.test', /169\.254\.169\.254 is a link-local address/],
    ['mixed.x.test', /127\.0\.0\.1 is a loopback address/],
  ])('%s → blocked_by_policy (every resolved address is checked)', async (name, why) => {
    const guard = new OutboundGuard(OutboundAllow.none, { resolver: resolverFor() });
    const err = await guard.resolve(name).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OutboundError);
    expect(err).toMatchObject({ kind: 'blocked_by_policy' });
    expect((err as Error).message).toMatch(why);
  });

  it('a dropped name is a dns_failure that says why', async () => {
    const guard = new OutboundGuard(allowLoopback, { resolver: resolverFor({ deadlineMs: 500 }) });
    const err = await guard.resolve('drop-guard.bad.test').catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'dns_failure' });
    expect((err as Error).message).toMatch(/did not resolve within 500 ms/);
  });

  describe('HTTP connects to the checked address (pinned), names resolved by c-ares', () => {
    let server: HttpsServer;
    let port: number;
    let ca: string;
    const hosts: string[] = [];
    beforeAll(async () => {
      const cert = createSelfSignedCert(['sink.test', 'private.x.test']);
      ca = cert.cert;
      server = createHttpsServer({ key: cert.key, cert: cert.cert }, (req, res) => {
        hosts.push(String(req.headers.host));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
      port = (server.address() as AddressInfo).port;
    });
    afterAll(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });

    it('https to a name that resolves to an allowed address is sent; the same to a private one never connects', async () => {
      const http = createOutboundHttp(allowLoopback, { resolver: resolverFor(), ca });
      const ok = await http.request({ method: 'POST', url: `https://sink.test:${port}/hook`, body: '{}' });
      expect(ok.status).toBe(200);
      expect(hosts).toEqual([`sink.test:${port}`]);
      const err = await http
        .request({ method: 'POST', url: `https://private.x.test:${port}/hook`, body: '{}' })
        .catch((e: unknown) => e);
      expect(err).toMatchObject({ kind: 'blocked_by_policy' });
      expect(hosts).toHaveLength(1);
    });

    it('a dropped name fails the request inside its budget as dns_failure, not a hang', async () => {
      const http = createOutboundHttp(allowLoopback, {
        resolver: resolverFor({ deadlineMs: 500 }),
        ca,
        connectTimeoutMs: 3_000,
      });
      const r = await timed(
        http.request({ method: 'POST', url: `https://drop-http.bad.test:${port}/hook`, body: '{}', timeoutMs: 5_000 }),
      );
      expect(r.error).toMatchObject({ kind: 'dns_failure', retryable: true });
      expect(r.ms).toBeLessThan(2_500);
    });
  });
});

describe('the connection test deadline', () => {
  it('answers unreachable with the reason when the test does not finish in time', async () => {
    const hanging: Resolver = () => new Promise(() => undefined); // a resolver stuck for ever
    const http = createOutboundHttp(OutboundAllow.none, { resolver: hanging });
    const smtp = createSmtpClient({ guard: http.guard });
    const deps = {
      http,
      slackApiUrl: 'http://127.0.0.1:9/api/',
      telegramApiUrl: 'http://127.0.0.1:9',
      now: () => Date.now(),
    };
    const adapters = await loadChannelAdapters();
    const tester = createConnectionTester({
      ...deps,
      adapters,
      senders: createChannelSenders(adapters, { ...deps, smtp }),
      smtp,
      clock: { now: () => new Date() },
      deadlineMs: 400,
    });
    const conn = {
      id: 'con_1',
      name: 'hook',
      type: 'webhook',
      enabled: true,
      config: { url: 'https://stuck.example.test/hook', headers: {} },
      secrets: { secret: 'whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0' },
      rateLimitPerMinute: null,
      health: {
        status: 'unknown',
        last_success_at: null,
        last_failure_at: null,
        last_error: null,
        consecutive_failures: 0,
      },
    } as unknown as DeliveryConnection;
    const r = await timed(tester.test(conn, { sendMessage: true }));
    expect(r.value).toMatchObject({ ok: false, status: 'unreachable', sent_message: false });
    expect(r.value?.detail).toMatch(/^the test did not finish within 400 ms/);
    expect(r.value?.detail).toContain('stuck.example.test');
    expect(r.ms).toBeLessThan(2_000);
  });
});

describe('the delivery attempt deadline', () => {
  it('an attempt that never ends is a retryable, ambiguous failure at the deadline', async () => {
    const http = createOutboundHttp(OutboundAllow.none, { resolver: resolverFor() });
    const stuck = {
      send: () => new Promise<never>(() => undefined),
      verify: () => new Promise<never>(() => undefined),
    };
    const senders = createChannelSenders(await loadChannelAdapters(), {
      http,
      slackApiUrl: 'http://127.0.0.1:9/api/',
      telegramApiUrl: 'http://127.0.0.1:9',
      attemptDeadlineMs: 300,
      smtp: stuck,
    });
    const target = {
      id: 'con_1',
      name: 'mail',
      type: 'email',
      enabled: true,
      config: {
        host: 'smtp.example.test',
        port: 587,
        security: 'starttls',
        from: 'a@example.test',
        to: ['b@example.test'],
      },
      secrets: {},
      rateLimitPerMinute: null,
      health: {},
    } as unknown as Extract<DeliveryConnection, { type: 'email' }>;
    const message = {
      deliveryId: 'dlv_1',
      executionId: 'exe_1',
      incident: { id: 'inc_1', title: 't', severity: 'low' as const, status: 'investigating' as const, url: null },
      content: { subject: 's', body: 'b' },
    };
    const r = await timed(senders.email.send(target, message));
    expect(r.value).toMatchObject({
      outcome: 'retryable',
      ambiguous: true,
      error: 'the attempt did not finish within 300 ms',
    });
    expect(r.ms).toBeLessThan(2_000);
  });
});

describe('a running Herald under slow and silent DNS', () => {
  let h: TestHerald;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await startWebhookReceiver({ acceptUnverified: true });
    h = await startHerald({
      HERALD_DNS_SERVERS: dns.address,
      // http to the healthy names needs them allow-listed; the silent ones are https (no allow).
      HERALD_OUTBOUND_ALLOW: '127.0.0.1/32,*.ok.test',
      HERALD_RATE_LIMIT: '100000',
      HERALD_EXECUTE_RATE_LIMIT: '100000',
    });
  });
  afterAll(async () => {
    await h?.close();
    await receiver?.close();
  });

  it('40 connection tests and 25 executes on dropping names leave healthy tests and deliveries fast', async () => {
    // Herald runs in this process: on a saturated machine, stretches in which it could not run
    // at all are left out of the healthy requests' times (support/starvation.ts).
    const starvation = new Starvation();
    try {
      await dnsStorm(starvation);
    } finally {
      starvation.stop();
    }
  }, 60_000);

  async function dnsStorm(starvation: Starvation): Promise<void> {
    const ran = (t: { started: number; ended: number }) => t.ended - t.started - starvation.within(t.started, t.ended);
    const port = new URL(receiver.url).port;
    const create = async (name: string, url: string) => {
      const r = await h.api('POST', '/v1/connections', { body: { name, type: 'webhook', config: { url } } });
      expect(r.status).toBe(201);
      return r.body.id as string;
    };
    const bad = await Promise.all(
      Array.from({ length: 40 }, (_, i) => create(`silent ${i}`, `https://drop-${i}.silent.test/hook`)),
    );
    const good = await create('healthy', `http://hook.ok.test:${port}/hook`);
    const slow = await create('slow dns', `http://slow.ok.test:${port}/hook`);

    const badTests = bad.map((id) =>
      timed(h.api('POST', `/v1/connections/${id}/test`, { body: { send_message: true } })),
    );
    const incidents = await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        h.api('POST', '/v1/incidents', { body: { title: `DNS storm ${i}`, severity: 'minor' } }),
      ),
    );
    // When each execute was accepted: a healthy delivery's wait is measured from there.
    const executes = incidents.map((inc, i) =>
      h
        .api('POST', `/v1/incidents/${inc.body.id}/execute`, { body: { connection_ids: [bad[i % bad.length], good] } })
        .then((r) => ({ r, acceptedAt: performance.now() })),
    );
    const goodTests = await Promise.all(
      Array.from({ length: 5 }, () =>
        timed(h.api('POST', `/v1/connections/${good}/test`, { body: { send_message: true } })),
      ),
    );
    const slowTest = await timed(h.api('POST', `/v1/connections/${slow}/test`, { body: { send_message: true } }));
    const accepted = await Promise.all(executes);
    for (const x of accepted) expect(x.r.status).toBe(202);

    // The silent ones answer unreachable, with the reason, once c-ares gives up on them.
    const badDone = await Promise.all(badTests);
    for (const b of badDone) {
      expect(b.value?.status).toBe(200);
      expect(b.value?.body).toMatchObject({ ok: false, status: 'unreachable' });
      expect(b.value?.body.detail).toMatch(/did not resolve/);
    }
    // The bound is how long a silent name holds its lookup, measured in this run, not a guess at
    // the machine's speed: anything held behind a silent name waits at least that long. It is
    // taken whole: a lookup's timers keep running while the process cannot, so it would shrink by
    // stretches it did not wait any less for.
    const silentHolds = Math.min(...badDone.map((b) => b.ms));
    for (const g of goodTests) {
      expect(g.value?.status).toBe(200);
      expect(g.value?.body).toMatchObject({ ok: true, status: 'ok' });
    }
    const longestHealthyTest = Math.max(...goodTests.map(ran));
    expect(longestHealthyTest).toBeLessThan(silentHolds);
    expect(slowTest.value?.body).toMatchObject({ ok: true, status: 'ok' });
    expect(ran(slowTest)).toBeLessThan(silentHolds);
    // Every healthy delivery of the 25 executes arrives, each sooner after its execute was
    // accepted than the silent delivery beside it can give up.
    const healthy = () => receiver.requests.filter((r) => (r.body as { type?: string }).type === 'incident.executed');
    await waitFor(() => healthy().length >= 25, { timeoutMs: 30_000, what: 'the 25 healthy deliveries' });
    const waits = accepted.map(({ r, acceptedAt }) => {
      const arrived = healthy().find((d) => (d.body as { execution_id?: string }).execution_id === r.body.id);
      expect(arrived, `the healthy delivery of ${String(r.body.id)}`).toBeDefined();
      // The sink stamps arrivals with Date.now(): on this process' performance.now() clock.
      return ran({ started: acceptedAt, ended: (arrived?.receivedAt ?? Infinity) - performance.timeOrigin });
    });
    const longestWait = Math.max(...waits);
    const ms = (x: number) => Math.round(x);
    const starved = ms(starvation.within(Math.min(...badDone.map((b) => b.started)), performance.now()));
    console.log(
      `bounded DNS: healthy tests ≤ ${ms(longestHealthyTest)} ms, slow-DNS test ${ms(ran(slowTest))} ms, ` +
        `healthy deliveries ≤ ${ms(longestWait)} ms after their execute; 40 silent tests ${ms(silentHolds)}–${ms(Math.max(...badDone.map((b) => b.ms)))} ms ` +
        `(the healthy ones' times leave out the ${starved} ms in which this process could not run)`,
    );
    expect(longestWait).toBeLessThan(silentHolds);
  }
});
