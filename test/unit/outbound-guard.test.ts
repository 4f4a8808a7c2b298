import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import net, { type AddressInfo } from 'node:net';
import type { LookupAddress } from 'node:dns';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import { OutboundError } from '../../src/delivery/outbound/error.js';
import { resolveGuardedSmtpHost, type Resolver } from '../../src/delivery/outbound/guard.js';
import { createOutboundHttp, type OutboundRequest } from '../../src/delivery/outbound/http.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';
import { createSelfSignedCert } from '../support/peers/self-signed-cert.js';

/**
 * The outbound guard over real loopback sockets. This machine has no network beyond loopback, and
 * the tests never send a packet elsewhere: every non-loopback address below must be refused
 * before a socket is opened, which `net.Socket.prototype.connect` being untouched proves.
 */

const allow = (...entries: string[]) => OutboundAllow.parse(entries);
const NOTHING = allow();
const PUBLIC_IP = '93.184.215.14';

/** A fake DNS: names map to fixed answers (or a sequence of answers, one per lookup). */
function fakeDns(table: Record<string, string[] | string[][]>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const seen = new Map<string, number>();
  const resolver = async (name: string): Promise<LookupAddress[]> => {
    calls.push(name);
    const entry = table[name];
    if (!entry) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    const n = seen.get(name) ?? 0;
    seen.set(name, n + 1);
    const answer = (Array.isArray(entry[0]) ? (entry as string[][])[Math.min(n, entry.length - 1)] : entry) as string[];
    return answer.map((address) => ({ address, family: net.isIP(address) }));
  };
  return Object.assign(resolver, { calls });
}

async function failure(p: Promise<unknown>): Promise<OutboundError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(OutboundError);
    return e as OutboundError;
  }
  throw new Error('expected the request to fail');
}

let sink: HttpSink;
let tls: { server: HttpsServer; port: number; connections: number; requests: string[]; ca: string };
/** Counts TCP connections on ::1, to prove the guard never connected there. */
let v6: { server: net.Server; port: number; connections: number };

beforeAll(async () => {
  sink = await startHttpSink();
  const cert = createSelfSignedCert(['sink.test', 'localhost', '127.0.0.1']);
  const t = { connections: 0, requests: [] as string[] };
  const server = createHttpsServer({ key: cert.key, cert: cert.cert }, (req, res) => {
    t.requests.push(`${req.method} ${req.headers.host} ${req.url}`);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
  server.on('connection', () => t.connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  tls = Object.assign(t, { server, port: (server.address() as AddressInfo).port, ca: cert.cert });
  const v6server = net.createServer((s) => s.destroy());
  const v6state = { connections: 0 };
  v6server.on('connection', () => v6state.connections++);
  await new Promise<void>((r) => v6server.listen(0, '::1', r));
  v6 = Object.assign(v6state, { server: v6server, port: (v6server.address() as AddressInfo).port });
});

afterAll(async () => {
  await sink.close();
  tls.server.closeAllConnections();
  await new Promise((r) => tls.server.close(r));
  await new Promise((r) => v6.server.close(r));
});

afterEach(() => {
  sink.clear();
  vi.restoreAllMocks();
});

describe('refuses non-public addresses at connect time', () => {
  const literalCases: [string, string][] = [
    ['loopback 127.0.0.1', 'https://127.0.0.1:{tls}/hook'],
    ['private 10.0.0.1', 'https://10.0.0.1/hook'],
    ['cloud metadata 169.254.169.254', 'https://169.254.169.254/latest/meta-data/'],
    ['CGNAT 100.64.0.1', 'https://100.64.0.1/'],
    ['IPv6 loopback [::1]', 'https://[::1]:{v6}/hook'],
    ['IPv4-mapped loopback [::ffff:127.0.0.1]', 'https://[::ffff:127.0.0.1]:{tls}/hook'],
    ['IPv4-mapped private [::ffff:10.0.0.1]', 'https://[::ffff:10.0.0.1]/'],
    ['unique-local [fd00::1]', 'https://[fd00::1]/'],
    ['multicast 224.0.0.1', 'https://224.0.0.1/'],
    ['unspecified 0.0.0.0', 'https://0.0.0.0:{tls}/'],
  ];
  it.each(literalCases)('%s → blocked_by_policy before any socket is opened', async (_name, template) => {
    const connect = vi.spyOn(net.Socket.prototype, 'connect');
    const http = createOutboundHttp(NOTHING);
    const url = template.replace('{tls}', String(tls.port)).replace('{v6}', String(v6.port));
    const started = Date.now();
    const err = await failure(http.request({ method: 'POST', url, body: '{}' }));
    expect(err.kind).toBe('blocked_by_policy');
    expect(err.retryable).toBe(false);
    expect(err.ambiguous).toBe(false);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(connect).not.toHaveBeenCalled();
    expect(tls.connections).toBe(0);
    expect(v6.connections).toBe(0);
  });

  it('checks the resolved address, not the name: localhost is refused', async () => {
    const http = createOutboundHttp(allow('10.0.0.0/8', 'hooks.example.com'));
    const err = await failure(http.request({ method: 'POST', url: `https://localhost:${tls.port}/hook` }));
    expect(err.kind).toBe('blocked_by_policy');
    expect(err.message).toMatch(/loopback/);
    expect(tls.connections).toBe(0);
  });

  it('refuses a public-looking name that resolves to a private or mapped address', async () => {
    const dns = fakeDns({ 'hooks.evil.test': ['10.1.2.3'], 'mapped.evil.test': ['::ffff:169.254.169.254'] });
    const http = createOutboundHttp(NOTHING, { resolver: dns });
    // The refusal comes from the guarded lookup itself, so the socket never gets an address.
    expect((await failure(http.request({ method: 'POST', url: 'https://hooks.evil.test/x' }))).kind).toBe(
      'blocked_by_policy',
    );
    expect((await failure(http.request({ method: 'POST', url: 'https://mapped.evil.test/x' }))).kind).toBe(
      'blocked_by_policy',
    );
    expect(dns.calls).toEqual(['hooks.evil.test', 'mapped.evil.test']);
  });

  it('refuses a mixed answer (one public, one loopback) as a whole', async () => {
    const dns = fakeDns({ 'mixed.test': [PUBLIC_IP, '127.0.0.1'] });
    const http = createOutboundHttp(NOTHING, { resolver: dns });
    const err = await failure(http.request({ method: 'POST', url: `https://mixed.test:${tls.port}/x` }));
    expect(err.kind).toBe('blocked_by_policy');
    expect(tls.connections).toBe(0);
  });

  it('is DNS-rebinding safe: a pre-check that passed does not let a later answer through', async () => {
    // First answer public (the pre-flight check of a connection test), then loopback (the connect).
    const dns = fakeDns({ 'rebind.test': [[PUBLIC_IP], ['127.0.0.1']] });
    const http = createOutboundHttp(NOTHING, { resolver: dns });
    await expect(http.guard.resolve('rebind.test')).resolves.toEqual([{ address: PUBLIC_IP, family: 4 }]);
    const err = await failure(http.request({ method: 'POST', url: `https://rebind.test:${tls.port}/x` }));
    expect(err.kind).toBe('blocked_by_policy');
    expect(err.message).toContain('rebind.test resolved to it');
    expect(dns.calls).toEqual(['rebind.test', 'rebind.test']);
    expect(tls.connections).toBe(0);
  });
});

describe('the allow list opens holes on purpose', () => {
  it('a CIDR 127.0.0.1/32 lets a literal loopback through, over plain http too', async () => {
    const http = createOutboundHttp(allow('127.0.0.1/32'));
    const res = await http.request({
      method: 'POST',
      url: `${sink.url}/hook?x=1`,
      headers: { 'content-type': 'application/json' },
      body: '{"text":"hi"}',
    });
    expect(res.status).toBe(200);
    expect(res.truncated).toBe(false);
    expect(res.latencyMs).toBeGreaterThanOrEqual(0);
    expect(sink.requests).toHaveLength(1);
    expect(sink.requests[0]).toMatchObject({ method: 'POST', path: '/hook', query: { x: '1' }, body: { text: 'hi' } });
    expect(sink.requests[0]!.headers['content-length']).toBe('13');
  });

  it('judges IPv4-mapped IPv6 as the IPv4 it carries', async () => {
    const http = createOutboundHttp(allow('127.0.0.1/32'));
    const res = await http.request({ method: 'GET', url: `http://[::ffff:127.0.0.1]:${sink.port}/mapped` });
    expect(res.status).toBe(200);
    expect(sink.requests.map((r) => r.path)).toEqual(['/mapped']);
  });

  it('a CIDR covers names that resolve into it (https, certificate checked against the name)', async () => {
    const dns = fakeDns({ 'sink.test': ['127.0.0.1'] });
    const http = createOutboundHttp(allow('127.0.0.1/32'), { resolver: dns, ca: tls.ca });
    const res = await http.request({ method: 'POST', url: `https://sink.test:${tls.port}/tls`, body: '{}' });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ ok: true });
    expect(tls.requests.at(-1)).toBe(`POST sink.test:${tls.port} /tls`);
  });

  it('a CIDR does not lift the https rule for a name it does not list', async () => {
    const dns = fakeDns({ 'sink.test': ['127.0.0.1'] });
    const http = createOutboundHttp(allow('127.0.0.1/32'), { resolver: dns });
    const err = await failure(http.request({ method: 'POST', url: `http://sink.test:${sink.port}/x` }));
    expect(err.kind).toBe('https_required');
    expect(dns.calls).toEqual([]);
  });

  it('a listed host name skips the address rule and the https rule', async () => {
    const http = createOutboundHttp(allow('localhost'));
    const res = await http.request({ method: 'GET', url: `http://localhost:${sink.port}/by-name` });
    expect(res.status).toBe(200);
    expect(sink.requests.map((r) => r.path)).toEqual(['/by-name']);
  });
});

describe('operator-trusted API bases (SLACK_API_URL, TELEGRAM_API_URL)', () => {
  it('skip the address and https rules under the base path only', async () => {
    const http = createOutboundHttp(NOTHING, { trustedBaseUrls: [`${sink.url}/api/`] });
    const res = await http.request({ method: 'POST', url: `${sink.url}/api/chat.postMessage`, body: '{}' });
    expect(res.status).toBe(200);
    for (const url of [`${sink.url}/other`, `${sink.url}/apix`, `http://localhost:${sink.port}/api/x`]) {
      expect((await failure(http.request({ method: 'POST', url }))).kind).toBe('https_required');
    }
    expect(sink.requests.map((r) => r.path)).toEqual(['/api/chat.postMessage']);
  });

  it('still never follow a redirect', async () => {
    const http = createOutboundHttp(NOTHING, { trustedBaseUrls: [`${sink.url}/api/`] });
    sink.script({ status: 307, headers: { location: 'http://169.254.169.254/' } });
    expect((await failure(http.request({ method: 'POST', url: `${sink.url}/api/x` }))).kind).toBe('redirect');
  });
});

describe('https, redirects and failures', () => {
  const open = createOutboundHttp(allow('127.0.0.1/32'));
  const post = (path: string, extra: Partial<OutboundRequest> = {}) =>
    open.request({ method: 'POST', url: `${sink.url}${path}`, body: '{}', ...extra });

  it('refuses plain http to a host the allow list does not name, before resolving it', async () => {
    const dns = fakeDns({ 'hooks.example.com': [PUBLIC_IP] });
    const http = createOutboundHttp(NOTHING, { resolver: dns });
    for (const url of ['http://hooks.example.com/x', `http://${PUBLIC_IP}/x`, `http://127.0.0.1:${sink.port}/x`]) {
      const err = await failure(http.request({ method: 'POST', url }));
      expect(err.kind).toBe('https_required');
      expect(err.retryable).toBe(false);
    }
    expect(dns.calls).toEqual([]);
    expect(sink.requests).toHaveLength(0);
  });

  it('a certificate that does not verify is a tls_error, not ambiguous', async () => {
    const dns = fakeDns({ 'sink.test': ['127.0.0.1'] });
    const http = createOutboundHttp(allow('127.0.0.1/32'), { resolver: dns }); // no CA for the self-signed cert
    const err = await failure(http.request({ method: 'POST', url: `https://sink.test:${tls.port}/x`, body: '{}' }));
    expect(err).toMatchObject({ kind: 'tls_error', ambiguous: false, retryable: true });
  });

  it('refuses what is not an http(s) URL', async () => {
    for (const url of ['ftp://example.com/x', 'not a url', 'file:///etc/passwd'])
      expect((await failure(open.request({ method: 'GET', url }))).kind).toBe('invalid_url');
  });

  it('never follows a redirect: a 3xx is a permanent "redirect" failure', async () => {
    sink.script({ status: 302, headers: { location: `${sink.url}/elsewhere` } });
    const err = await failure(post('/hook'));
    expect(err).toMatchObject({
      kind: 'redirect',
      httpStatus: 302,
      location: `${sink.url}/elsewhere`,
      retryable: false,
      ambiguous: false,
    });
    expect(err.message).not.toContain(sink.url); // URLs carry secrets: messages name hosts only
    expect(sink.requests.map((r) => r.path)).toEqual(['/hook']);
  });

  it('returns 4xx and 5xx as data, with headers such as Retry-After', async () => {
    sink.script(
      { status: 429, headers: { 'retry-after': '7' }, body: 'rate_limited' },
      { status: 503, body: { error: 'down' } },
    );
    const r1 = await post('/a');
    expect(r1).toMatchObject({ status: 429, body: 'rate_limited' });
    expect(r1.headers['retry-after']).toBe('7');
    const r2 = await post('/b');
    expect(r2.status).toBe(503);
    expect(JSON.parse(r2.body)).toEqual({ error: 'down' });
  });

  it('a slow destination is a time-out after sending: ambiguous and retryable', async () => {
    sink.script({ delayMs: 5_000, body: 'late' });
    const started = Date.now();
    const err = await failure(post('/slow', { timeoutMs: 300 }));
    expect(err).toMatchObject({ kind: 'timeout', ambiguous: true, retryable: true });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(sink.requests).toHaveLength(1); // it did arrive: that is why it is ambiguous
  });

  it('on a kept-alive connection too, a slow destination is a time-out after sending (ambiguous), never a connect time-out', async () => {
    // The first request leaves its connection idle in the pool; the second one is sent on it.
    sink.script({ body: 'ok' }, { delayMs: 5_000, body: 'late' });
    expect((await post('/first')).status).toBe(200);
    const err = await failure(post('/slow-reused', { timeoutMs: 300 }));
    expect(err).toMatchObject({ kind: 'timeout', ambiguous: true, retryable: true });
    expect(sink.requests.map((r) => r.path)).toEqual(['/first', '/slow-reused']);
  });

  it('a reset after the request was sent is a network error flagged ambiguous', async () => {
    sink.script({ reset: true });
    const err = await failure(post('/reset'));
    expect(err).toMatchObject({ kind: 'reset', ambiguous: true, retryable: true });
  });

  it('a refused connection is retryable and not ambiguous', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const err = await failure(open.request({ method: 'POST', url: `http://127.0.0.1:${port}/x`, body: '{}' }));
    expect(err).toMatchObject({ kind: 'connection_refused', ambiguous: false, retryable: true });
  });

  it('no connection within the connect budget is a connect_timeout, not ambiguous', async () => {
    const never: Resolver = () => new Promise<LookupAddress[]>(() => undefined); // a resolver that hangs
    const http = createOutboundHttp(NOTHING, { resolver: never, connectTimeoutMs: 100 });
    const err = await failure(http.request({ method: 'POST', url: 'https://hanging.test/x', timeoutMs: 5_000 }));
    expect(err).toMatchObject({ kind: 'connect_timeout', ambiguous: false, retryable: true });
    expect(err.latencyMs).toBeLessThan(1_000);
  });

  it('a name that does not resolve is a dns_failure, not ambiguous', async () => {
    const http = createOutboundHttp(NOTHING, { resolver: fakeDns({}) });
    const err = await failure(http.request({ method: 'POST', url: 'https://nowhere.test/x' }));
    expect(err).toMatchObject({ kind: 'dns_failure', ambiguous: false, retryable: true });
  });

  it('caps the answer it reads and says it did', async () => {
    sink.script({ body: 'x'.repeat(3 * 1024 * 1024) });
    const res = await post('/big');
    expect(res.status).toBe(200);
    expect(res.truncated).toBe(true);
    expect(res.body.length).toBe(1024 * 1024);
    const small = createOutboundHttp(allow('127.0.0.1/32'), { maxResponseBytes: 10 });
    sink.script({ body: 'abcdefghijklmnop' });
    const r2 = await small.request({ method: 'GET', url: `${sink.url}/small` });
    expect(r2).toMatchObject({ body: 'abcdefghij', truncated: true });
  });
});

describe('resolveGuardedSmtpHost', () => {
  it('resolves once and hands back the checked IP plus the name for TLS', async () => {
    const dns = fakeDns({ 'smtp.example.test': [PUBLIC_IP] });
    await expect(resolveGuardedSmtpHost('smtp.example.test', NOTHING, { resolver: dns })).resolves.toEqual({
      address: PUBLIC_IP,
      family: 4,
      servername: 'smtp.example.test',
    });
    expect(dns.calls).toEqual(['smtp.example.test']);
  });

  it('refuses private, loopback and metadata destinations, literal or resolved', async () => {
    const dns = fakeDns({ 'mail.internal.test': ['192.168.1.10'] });
    for (const host of [
      '127.0.0.1',
      '169.254.169.254',
      '[::1]',
      '::ffff:10.0.0.1',
      'mail.internal.test',
      'localhost',
    ]) {
      const err = await failure(
        resolveGuardedSmtpHost(host, NOTHING, { resolver: host === 'localhost' ? undefined : dns }),
      );
      expect(err.kind).toBe('blocked_by_policy');
    }
  });

  it('honours the allow list', async () => {
    await expect(resolveGuardedSmtpHost('127.0.0.1', allow('127.0.0.1/32'))).resolves.toEqual({
      address: '127.0.0.1',
      family: 4,
      servername: null,
    });
    const viaName = await resolveGuardedSmtpHost('localhost', allow('localhost'));
    expect(['127.0.0.1', '::1']).toContain(viaName.address);
    expect(viaName.servername).toBe('localhost');
  });
});
