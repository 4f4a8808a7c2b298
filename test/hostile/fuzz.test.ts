import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { ACTIONS, CALLBACKS } from '../../src/slack/views/action-ids.js';
import { startDnsServer, type DnsServer } from '../support/dns-server.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startSlack, type SlackPeer } from '../support/peers/slack.js';
import { logLines, rawClient, type RawResponse } from './raw-http.js';

/**
 * Property-based fuzzing of every endpoint of manifest/openapi.json and of /slack/events
 * (docs/api.md "Errors"): malformed, oversized, wrongly typed, deeply nested, prototype-polluting,
 * invalid-UTF-8 and unicode-hostile input, odd content types and methods, long and garbage
 * headers, query tricks. Invariants on every answer: no 5xx, no hang (a per-request deadline),
 * problem+json for every /v1 error (a Slack-shaped answer on /slack/events), nothing at error
 * level in the log — and afterwards the stored incidents, templates and connections are exactly
 * what the requests answered 2xx made. One in-process Herald, one keep-alive connection pool.
 */
const API_RUNS = Number(process.env.HERALD_FUZZ_API_RUNS ?? 8_000);
const SLACK_RUNS = Number(process.env.HERALD_FUZZ_SLACK_RUNS ?? 3_000);
const DEADLINE_MS = 10_000;
/** A failure prints its seed; HERALD_FUZZ_SEED=<seed> replays that run. */
const SEED = process.env.HERALD_FUZZ_SEED === undefined ? {} : { seed: Number(process.env.HERALD_FUZZ_SEED) };
const SECRET = 'slack-signing-secret-fuzz';

const doc = JSON.parse(readFileSync(new URL('../../manifest/openapi.json', import.meta.url), 'utf8')) as {
  paths: Record<string, Record<string, unknown>>;
};
const OPERATIONS = Object.entries(doc.paths).flatMap(([path, ops]) =>
  Object.keys(ops)
    .filter((m) => ['get', 'post', 'patch', 'put', 'delete'].includes(m))
    .map((m) => ({ method: m.toUpperCase(), path })),
);

let h: TestHerald;
let slack: SlackPeer;
let dns: DnsServer;
let raw: ReturnType<typeof rawClient>;
const logs = logLines();
let cases = 0;
let slowest = 0;

// ── the model: what the 2xx answers say is stored ───────────────────────────────────────────
type Kind = 'incidents' | 'templates' | 'connections';
const model: Record<Kind, Map<string, Record<string, unknown>>> = {
  incidents: new Map(),
  templates: new Map(),
  connections: new Map(),
};
const executions: string[] = [];

function kindOf(path: string): Kind | null {
  const m = /^\/v1\/(incidents|templates|connections)(?:\/|$)/.exec(path);
  return m ? (m[1] as Kind) : null;
}

/** Records what a 2xx write made (create, bulk create, patch, close, delete). */
function record(method: string, path: string, r: RawResponse): void {
  if (r.status < 200 || r.status > 299) return;
  const clean = path.split('?')[0]!;
  const kind = kindOf(clean);
  if (!kind) return;
  const parts = clean.split('/').filter(Boolean); // v1, kind, id?, sub?
  const body = r.json as Record<string, unknown> | undefined;
  if (method === 'POST' && parts.length === 2) {
    if (Array.isArray(body?.data))
      for (const t of body.data as Record<string, unknown>[]) model[kind].set(String(t.id), t);
    else if (body?.id) model[kind].set(String(body.id), body);
  } else if (method === 'PATCH' && parts.length === 3 && body?.id) {
    model[kind].set(String(body.id), body);
  } else if (method === 'POST' && parts[3] === 'close' && body?.id) {
    model[kind].set(String(body.id), body);
  } else if (method === 'POST' && parts[3] === 'execute' && body?.id) {
    executions.push(`${parts[2]}/${String(body.id)}`);
    // A real (not dry-run) execute is counted on its incident.
    const incident = model.incidents.get(parts[2]!);
    if (r.status === 202 && incident) incident.execution_count = Number(incident.execution_count) + 1;
  } else if (method === 'DELETE' && parts.length === 3 && r.status === 204) {
    model[kind].delete(parts[2]!);
  }
}

// ── arbitraries ──────────────────────────────────────────────────────────────────────────────
const HOSTILE_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfff',
  '\u202egnp.exe',
  'zero\u200bwidth',
  '\ufeffbom',
  'e\u0301\u0301\u0301',
  '𝕳𝖊𝖗𝖆𝖑𝖉 📟',
  '\t\n\r\n',
  '\u001b[31mred',
  '{{#incident}}{{/incident}}',
  '{{{incident.title}}}',
  '{{> partial}}',
  '{{=<% %>=}}',
  '<script>alert(1)</script>',
  '<!channel> @everyone',
  '${7*7}',
  '../../etc/passwd',
  '%00%ff',
  'null',
  'undefined',
  '__proto__',
  'constructor',
  'NaN',
  '-1',
  '1e309',
  'x'.repeat(5000),
  'https://hooks.example.com/services/x',
  'http://127.0.0.1:9/hook',
  'http://169.254.169.254/latest/meta-data/',
  'https://[::1]/x',
  'https://0x7f.1/x',
  'whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0',
];

const hostileString = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
  { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_STRINGS) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
);

const POLLUTING_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'hasOwnProperty',
  'toString',
  'valueOf',
  '__defineGetter__',
];
const anyKey = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: fc.constantFrom(...POLLUTING_KEYS) },
);

const scalar = fc.oneof(
  hostileString,
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(-0),
  fc.constant(Number.MAX_SAFE_INTEGER + 2),
);
const anyValue: fc.Arbitrary<unknown> = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalar,
    fc.array(tie('v'), { maxLength: 4 }),
    fc.dictionary(anyKey, tie('v'), { maxKeys: 4 }),
  ),
})).v;

/** A field's value: usually plausible, often the wrong type, sometimes hostile. */
const field = (plausible: fc.Arbitrary<unknown>) =>
  fc.oneof(
    { weight: 5, arbitrary: plausible },
    { weight: 2, arbitrary: hostileString },
    { weight: 2, arbitrary: anyValue },
  );

/** An id: of something that exists (resolved at send time), a look-alike, or garbage. */
type IdPick = { known: Kind | 'executions'; n: number } | { literal: string };
const idPick = (kind: Kind | 'executions'): fc.Arbitrary<IdPick> =>
  fc.oneof(
    { weight: 5, arbitrary: fc.record({ known: fc.constant(kind), n: fc.nat() }) },
    {
      weight: 2,
      arbitrary: fc.record({
        literal: fc.constantFrom(
          'inc_01JZZZZZZZZZZZZZZZZZZZZZZZ',
          'tpl_01JZZZZZZZZZZZZZZZZZZZZZZZ',
          'con_01JZZZZZZZZZZZZZZZZZZZZZZZ',
          'exe_01JZZZZZZZZZZZZZZZZZZZZZZZ',
          'x',
          '0',
          '-1',
        ),
      }),
    },
    { weight: 2, arbitrary: fc.record({ literal: hostileString }) },
  );

function resolveId(p: IdPick): string {
  if ('literal' in p) return p.literal;
  if (p.known === 'executions') {
    const e = executions[p.n % Math.max(1, executions.length)];
    return e ? e.split('/')[1]! : 'exe_01JZZZZZZZZZZZZZZZZZZZZZZZ';
  }
  const ids = [...model[p.known].keys()];
  return ids.length > 0 ? ids[p.n % ids.length]! : `${p.known.slice(0, 3)}_01JZZZZZZZZZZZZZZZZZZZZZZZ`;
}

/** Bodies shaped like each operation's request, with fuzzed values (ids resolved at send time). */
const SEVERITY = fc.constantFrom('critical', 'major', 'minor', 'low', 'CRITICAL', 'sev1', '');
const STATUS = fc.constantFrom('investigating', 'identified', 'monitoring', 'resolved', 'closed', 'open');
const CHANNEL = fc.constantFrom(
  'webhook',
  'slack',
  'discord',
  'teams',
  'mattermost',
  'google_chat',
  'telegram',
  'email',
  'status_page',
  'smtp',
  'Webhook',
);
const URLS = fc.constantFrom(
  'https://hooks.example.test/x',
  'https://discord.com/api/webhooks/1/abc',
  'http://127.0.0.1:9/hook',
  'https://10.0.0.1/x',
  'ftp://x',
  'not a url',
);
const variables = fc.dictionary(
  fc.oneof(fc.constantFrom('eta', 'area', 'owner'), anyKey),
  field(fc.string({ maxLength: 30 })),
  { maxKeys: 4 },
);

/** `usual` most of the time (`k` to 1), otherwise a value of `arb`. */
const mostly = <T, U>(usual: T, k: number, arb: fc.Arbitrary<U>) =>
  fc.oneof({ weight: k, arbitrary: fc.constant(usual) }, { weight: 1, arbitrary: arb });
const optionalRecord = <T extends Record<string, fc.Arbitrary<unknown>>>(shape: T) =>
  fc.record(shape, { requiredKeys: [] });

const word = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9 ._-]{0,30}$/);

/** Bodies that should be accepted, so the run also stores things the model must account for. */
function validBody(method: string, path: string): fc.Arbitrary<unknown> | null {
  if (method === 'POST' && path === '/incidents')
    return fc.record({
      title: word,
      severity: fc.constantFrom('critical', 'major', 'minor', 'low'),
      description: fc.oneof(fc.constant(''), word, fc.constant('line 1\n\tline 2')),
    });
  if (method === 'PATCH' && path === '/incidents/{id}')
    return fc.oneof(
      fc.record({ description: word }),
      fc.record({ severity: fc.constantFrom('critical', 'major', 'minor', 'low') }),
      fc.record({ title: word }),
    );
  if (path === '/incidents/{id}/close') return fc.constant({});
  if (path === '/incidents/{id}/execute') return fc.constant({});
  if (method === 'POST' && path === '/templates')
    return fc.record({
      name: word.map((w) => `${w} ${Math.random().toString(36).slice(2, 8)}`),
      subject: word,
      body: fc.constantFrom('{{incident.title}}', 'Plain body', '{{incident.severity}}: {{incident.description}}'),
    });
  if (method === 'PATCH' && path === '/templates/{id}') return fc.record({ description: word });
  if (method === 'POST' && path === '/connections')
    return fc.record({
      name: word,
      type: fc.constant('webhook'),
      config: fc.record({ url: fc.constantFrom('https://hooks.example.test/a', 'https://hooks.example.test/b?x=1') }),
    });
  if (method === 'PATCH' && path === '/connections/{id}')
    return fc.oneof(fc.record({ name: word }), fc.record({ enabled: fc.boolean() }));
  if (path === '/connections/{id}/test') return fc.constant({});
  return null;
}

function plausibleBody(method: string, path: string): fc.Arbitrary<unknown> {
  const ids = (kind: Kind) => fc.array(fc.nat(), { maxLength: 3 }).map((n) => ({ $ids: kind, n }));
  if (method === 'POST' && path === '/incidents')
    return optionalRecord({
      title: field(fc.string({ minLength: 1, maxLength: 40 })),
      severity: field(SEVERITY),
      status: field(STATUS),
      description: field(fc.string()),
      impact: field(fc.string()),
      template_ids: field(ids('templates')),
    });
  if (method === 'PATCH' && path === '/incidents/{id}')
    return optionalRecord({
      title: field(fc.string({ minLength: 1, maxLength: 40 })),
      severity: field(SEVERITY),
      status: field(STATUS),
      description: field(fc.string()),
      template_ids: field(ids('templates')),
    });
  if (path === '/incidents/{id}/close')
    return optionalRecord({ resolution_summary: field(fc.string()), summary: field(fc.string()) });
  if (path === '/incidents/{id}/execute')
    return optionalRecord({ variables: field(variables), connection_ids: field(ids('connections')) });
  const template = optionalRecord({
    name: field(fc.string({ minLength: 1, maxLength: 30 })),
    subject: field(fc.string({ maxLength: 40 })),
    body: field(fc.string({ maxLength: 60 })),
    description: field(fc.string()),
    variables: field(
      fc.array(
        optionalRecord({
          name: field(fc.constantFrom('eta', 'area', 'bad-name')),
          required: field(fc.boolean()),
          default: field(fc.string()),
        }),
        { maxLength: 2 },
      ),
    ),
    connection_ids: field(ids('connections')),
  });
  if (method === 'POST' && path === '/templates')
    return fc.oneof({ weight: 4, arbitrary: template }, { weight: 1, arbitrary: fc.array(template, { maxLength: 3 }) });
  if (method === 'PATCH' && path === '/templates/{id}') return template;
  if (path === '/templates/{id}/render')
    return optionalRecord({
      variables: field(variables),
      incident_id: field(ids('incidents').map((x) => ({ $id: x }))),
    });
  const config = optionalRecord({
    url: field(URLS),
    webhook_url: field(URLS),
    secret: field(fc.string()),
    headers: field(fc.dictionary(anyKey, fc.string({ maxLength: 10 }), { maxKeys: 2 })),
    bot_token: field(fc.string()),
    channel: field(fc.string()),
    chat_id: field(fc.string()),
    host: field(fc.string()),
    port: field(fc.integer()),
    from: field(fc.string()),
    to: field(fc.array(fc.string(), { maxLength: 2 })),
    title: field(fc.string()),
    public_url: field(URLS),
    time_zone: field(fc.constantFrom('UTC', 'Europe/Berlin', 'Nowhere/Void', '')),
    locale: field(fc.constantFrom('en', 'de', 'xx')),
    frame_ancestors: field(fc.array(URLS, { maxLength: 2 })),
  });
  if (method === 'POST' && path === '/connections')
    return optionalRecord({
      name: field(fc.string({ minLength: 1, maxLength: 30 })),
      type: field(CHANNEL),
      config: field(config),
      enabled: field(fc.boolean()),
      rate_limit_per_minute: field(fc.integer()),
    });
  if (method === 'PATCH' && path === '/connections/{id}')
    return optionalRecord({
      name: field(fc.string({ minLength: 1, maxLength: 30 })),
      enabled: field(fc.boolean()),
      config: field(config),
    });
  if (path === '/connections/{id}/test') return optionalRecord({ send_message: field(fc.boolean()) });
  return fc.constant({});
}

/** Replaces `{$ids}` placeholders with ids of things that exist now. */
function materialize(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(materialize);
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    if ('$ids' in o && Array.isArray(o.n)) return (o.n as number[]).map((n) => resolveId({ known: o.$ids as Kind, n }));
    if ('$id' in o) {
      const list = materialize(o.$id) as string[];
      return list[0] ?? null;
    }
    // Own keys only, and defined as data: a `__proto__` key stays a plain key.
    const out: Record<string, unknown> = {};
    for (const [k, val] of Object.entries(o))
      Object.defineProperty(out, k, { value: materialize(val), enumerable: true, writable: true, configurable: true });
    return out;
  }
  return v;
}

type BodyBytes =
  | { kind: 'json'; value: unknown }
  | { kind: 'text'; text: string }
  | { kind: 'bytes'; bytes: Uint8Array }
  | { kind: 'deep'; depth: number; open: string }
  | { kind: 'big' }
  | { kind: 'none' };

function bodyArb(method: string, path: string): fc.Arbitrary<BodyBytes> {
  const valid = validBody(method, path);
  return fc.oneof(
    {
      weight: valid ? 30 : 0,
      arbitrary: (valid ?? fc.constant({})).map((value) => ({ kind: 'json' as const, value })),
    },
    { weight: 50, arbitrary: plausibleBody(method, path).map((value) => ({ kind: 'json' as const, value })) },
    { weight: 10, arbitrary: anyValue.map((value) => ({ kind: 'json' as const, value })) },
    {
      weight: 5,
      arbitrary: fc
        .constantFrom(
          '{"__proto__":{"admin":true},"constructor":{"prototype":{"polluted":1}}}',
          '{"title":"x","severity":"minor","__proto__":{"scopes":["*"]}}',
          '{"a":1,"a":2}',
          '{',
          '{"title":"x"',
          '[1,',
          '"str"',
          '1e999999',
          'nul',
          '\ufeff{}',
          '{"\\ud800":"x"}',
          '{"title":"\\udbff\\udfff ok","severity":"minor"}',
        )
        .map((text) => ({ kind: 'text' as const, text })),
    },
    { weight: 5, arbitrary: fc.uint8Array({ maxLength: 64 }).map((bytes) => ({ kind: 'bytes' as const, bytes })) },
    {
      weight: 5,
      arbitrary: fc
        .record({ depth: fc.integer({ min: 100, max: 20_000 }), open: fc.constantFrom('[', '{"a":') })
        .map((d) => ({ kind: 'deep' as const, ...d })),
    },
    { weight: 5, arbitrary: fc.constant({ kind: 'none' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'big' as const }) },
  );
}

function bodyBuffer(b: BodyBytes): Buffer | undefined {
  switch (b.kind) {
    case 'none':
      return undefined;
    case 'json':
      return Buffer.from(JSON.stringify(materialize(b.value)) ?? 'null');
    case 'text':
      return Buffer.from(b.text);
    case 'bytes':
      return Buffer.concat([Buffer.from('{"title":"'), Buffer.from(b.bytes), Buffer.from('","severity":"minor"}')]);
    case 'deep':
      return Buffer.from(b.open.repeat(b.depth) + '1' + (b.open === '[' ? ']' : '}').repeat(b.depth));
    case 'big':
      return Buffer.from(JSON.stringify({ title: 'x', description: 'y'.repeat(300 * 1024) }));
  }
}

const ODD_METHODS = [
  'PUT',
  'OPTIONS',
  'HEAD',
  'DELETE',
  'PATCH',
  'GET',
  'POST',
  'PROPFIND',
  'SEARCH',
  'PURGE',
  'MKCOL',
  'LOCK',
];
const CONTENT_TYPES = [
  'application/json',
  'application/json',
  'application/json; charset=utf-8',
  'application/JSON',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=latin1',
  'application/merge-patch+json',
  'application/problem+json',
  '',
  'garbage',
  'application/json; charset=utf-16',
];
const headerValue = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
  maxLength: 60,
});

const pathSegment = (kind: Kind | 'executions') =>
  fc.oneof(
    { weight: 6, arbitrary: idPick(kind).map((p) => ({ p })) },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(
          '%ZZ',
          '%',
          '%C0%80',
          '%ff',
          '..',
          '%2e%2e',
          '%2F',
          'a%00b',
          '%E2%80%AE',
          '__proto__',
          'constructor',
          ';x=1',
          '~',
          'x'.repeat(2000),
        )
        .map((s) => ({ rawSeg: s })),
    },
  );

const QUERY_TRICKS = [
  'limit=-1',
  'limit=0',
  'limit=1000000',
  'limit=abc',
  'limit=1&limit=2',
  'cursor=garbage',
  'cursor=' + 'A'.repeat(3000),
  'status=open',
  'status=resolved,closed',
  'status[]=x',
  'severity[$gt]=',
  '__proto__[admin]=1',
  'constructor[prototype][x]=1',
  'dry_run=yes',
  'dry_run=true',
  'type=webhook',
  'enabled=maybe',
  '%ZZ=1',
  'a=%ZZ',
  '&&&',
  '=',
  'q=%C3%A9',
];

const apiRequest = fc
  .record({
    // Deletes are rarer, so templates and connections live long enough to be patched and compared.
    op: fc.oneof(
      { weight: 20, arbitrary: fc.constantFrom(...OPERATIONS.filter((o) => o.method !== 'DELETE')) },
      { weight: 1, arbitrary: fc.constantFrom(...OPERATIONS.filter((o) => o.method === 'DELETE')) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          { method: 'GET', path: '/openapi.json' },
          { method: 'GET', path: '/nope' },
          { method: 'POST', path: '/incidents/{id}/nope' },
          { method: 'GET', path: '!/healthz' },
          { method: 'GET', path: '!/readyz' },
          { method: 'GET', path: '!/metrics' },
          { method: 'POST', path: '!/' },
          { method: 'GET', path: '!/slack/events' },
        ),
      },
    ),
    oddMethod: mostly(null, 10, fc.constantFrom(...ODD_METHODS)),
    segs: fc.record({
      id: pathSegment('incidents'),
      executionId: pathSegment('executions'),
      n: fc.oneof(
        fc.constantFrom(
          { rawSeg: '1' },
          { rawSeg: '2' },
          { rawSeg: '0' },
          { rawSeg: '-1' },
          { rawSeg: '1e3' },
          { rawSeg: '99999999999999999999' },
        ),
      ),
    }),
    query: mostly(
      null,
      4,
      fc.array(
        fc.oneof(
          fc.constantFrom(...QUERY_TRICKS),
          fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })).map(([k, v]) => `${pct(k)}=${pct(v)}`),
        ),
        { minLength: 1, maxLength: 3 },
      ),
    ),
    auth: fc.oneof(
      { weight: 12, arbitrary: fc.constant('admin') },
      {
        weight: 1,
        arbitrary: fc.constantFrom('none', 'garbage', 'basic', 'bearer-empty', 'long', 'reader', 'lowercase'),
      },
    ),
    contentType: mostly('application/json', 8, fc.constantFrom(...CONTENT_TYPES)),
    encoding: mostly(
      null,
      15,
      fc.constantFrom('gzip-valid', 'gzip', 'deflate', 'br', 'identity', 'snappy', 'gzip, gzip'),
    ),
    extraHeaders: mostly(
      null,
      5,
      fc.dictionary(
        fc.constantFrom(
          'If-Match',
          'Idempotency-Key',
          'X-Request-Id',
          'X-Garbage',
          'Accept',
          'Accept-Encoding',
          'Prefer',
          'X-Forwarded-For',
          'Origin',
          'Range',
        ),
        fc.oneof(headerValue, fc.constantFrom('"1"', 'W/"1"', '*', 'x'.repeat(1500), '""')),
        { maxKeys: 4 },
      ),
    ),
    bodySeed: fc.nat(),
  })
  .chain((r) => {
    const method = r.oddMethod ?? r.op.method;
    return bodyArb(method, r.op.path).map((body) => ({ ...r, method, body }));
  });

function segFor(s: { p?: IdPick; rawSeg?: string }, kind: Kind | 'executions'): string {
  if (s.rawSeg !== undefined) return s.rawSeg;
  const p = s.p!;
  return pct(resolveId('known' in p ? { known: kind, n: p.n } : p));
}

/** encodeURIComponent, except that a lone surrogate is sent as the bytes Node would write. */
function pct(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
  }
}

let readerToken = '';
function authHeader(kind: string): Record<string, string> {
  switch (kind) {
    case 'admin':
      return { authorization: `Bearer ${h.token}` };
    case 'none':
      return {};
    case 'garbage':
      return { authorization: 'Bearer hld_garbage' };
    case 'basic':
      return { authorization: 'Basic YWRtaW46YWRtaW4=' };
    case 'bearer-empty':
      return { authorization: 'Bearer ' };
    case 'long':
      return { authorization: `Bearer ${'A'.repeat(3000)}` };
    case 'reader':
      return { authorization: `Bearer ${readerToken}` };
    default:
      return { authorization: `bearer ${h.token}` };
  }
}

function checkApiAnswer(method: string, path: string, r: RawResponse): void {
  if (r.status >= 500) throw new Error(`${method} ${path.slice(0, 200)} → ${r.status}: ${r.text.slice(0, 300)}`);
  // HEAD and 204 have no body; /slack/events answers Slack-style (checked in the Slack property).
  if (method === 'HEAD' || r.status === 204 || r.status === 304 || path.startsWith('/slack/events')) return;
  const type = String(r.headers['content-type'] ?? '');
  if (r.status >= 400) {
    if (!type.startsWith('application/problem+json'))
      throw new Error(`${method} ${path.slice(0, 200)} → ${r.status} as ${type}: ${r.text.slice(0, 200)}`);
    const p = r.json as { status?: unknown; code?: unknown } | undefined;
    if (!p || p.status !== r.status || typeof p.code !== 'string')
      throw new Error(
        `${method} ${path.slice(0, 200)} → ${r.status} with a malformed problem: ${r.text.slice(0, 200)}`,
      );
  } else if (
    !type.startsWith('application/json') &&
    !(path.startsWith('/metrics') && type.startsWith('text/plain')) &&
    // The subscriber export is a file: CSV or NDJSON, as asked.
    !(path.startsWith('/v1/subscribers/export') && /^(text\/csv|application\/x-ndjson)/.test(type))
  ) {
    throw new Error(`${method} ${path.slice(0, 200)} → ${r.status} as ${type}`);
  }
}

// ── Slack ────────────────────────────────────────────────────────────────────────────────────
const slackUser = field(
  fc.record({ id: field(fc.constantFrom('UALICE', 'UBOB', 'U1')), name: fc.string({ maxLength: 8 }) }),
);
const slackState = fc.dictionary(
  anyKey,
  field(
    fc.dictionary(
      anyKey,
      field(
        fc.record(
          {
            type: field(fc.constantFrom('plain_text_input', 'static_select')),
            value: field(fc.string()),
            selected_option: field(fc.record({ value: field(fc.string()) })),
          },
          { requiredKeys: [] },
        ),
      ),
      { maxKeys: 2 },
    ),
  ),
  { maxKeys: 3 },
);
const slackView = optionalRecord({
  id: field(fc.constantFrom('V1', 'V2')),
  type: field(fc.constantFrom('modal', 'home')),
  callback_id: field(fc.constantFrom(...Object.values(CALLBACKS), 'nope')),
  blocks: field(fc.array(anyValue, { maxLength: 2 })),
  state: field(fc.record({ values: field(slackState) })),
  private_metadata: field(
    fc.oneof(
      fc.string(),
      fc.constant('{"incident_id":"inc_01JZZZZZZZZZZZZZZZZZZZZZZZ"}'),
      anyValue.map((v) => JSON.stringify(v) ?? ''),
    ),
  ),
});
const slackPayload = fc.oneof(
  optionalRecord({
    type: fc.constant('block_actions'),
    user: slackUser,
    actions: field(
      fc.array(
        optionalRecord({
          action_id: field(fc.constantFrom(...Object.values(ACTIONS), 'nope')),
          value: field(fc.oneof(fc.string(), fc.constant('inc_01JZZZZZZZZZZZZZZZZZZZZZZZ'))),
          type: fc.constant('button'),
          block_id: field(fc.string()),
          selected_option: field(anyValue),
        }),
        { maxLength: 2 },
      ),
    ),
    view: field(slackView),
    container: field(anyValue),
    channel: field(fc.record({ id: field(fc.string()) })),
    trigger_id: field(fc.string()),
  }),
  optionalRecord({
    type: fc.constantFrom('view_submission', 'view_closed'),
    user: slackUser,
    view: field(slackView),
    trigger_id: field(fc.string()),
  }),
  optionalRecord({
    type: fc.constant('block_suggestion'),
    user: slackUser,
    action_id: field(fc.string()),
    block_id: field(fc.string()),
    value: field(fc.string()),
    view: field(slackView),
  }),
  optionalRecord({
    type: field(fc.constantFrom('shortcut', 'message_action', 'interactive_message', 'dialog_submission')),
    user: slackUser,
    callback_id: field(fc.string()),
  }),
  anyValue,
);
const slackCommand = fc.dictionary(
  fc.constantFrom(
    'command',
    'text',
    'user_id',
    'user_name',
    'channel_id',
    'trigger_id',
    'team_id',
    'response_url',
    '__proto__',
    'payload',
  ),
  fc.oneof(
    fc.constantFrom(
      '/incident',
      'help',
      'list',
      'new Disk full',
      'show inc_01JZZZZZZZZZZZZZZZZZZZZZZZ',
      'close',
      'UALICE',
      'C1',
      '1.2.3',
    ),
    hostileString,
  ),
  { minKeys: 1, maxKeys: 8 },
);
const slackEvent = optionalRecord({
  type: field(fc.constantFrom('event_callback', 'url_verification', 'app_rate_limited')),
  challenge: field(fc.string()),
  event: field(
    optionalRecord({
      type: field(fc.constantFrom('app_home_opened', 'message', 'app_mention')),
      user: field(fc.string()),
      tab: field(fc.constantFrom('home', 'messages')),
    }),
  ),
  team_id: field(fc.string()),
});

const slackRequest = fc.record({
  body: fc.oneof(
    {
      weight: 4,
      arbitrary: slackPayload.map((p) => ({
        type: 'application/x-www-form-urlencoded',
        bytes: Buffer.from(`payload=${encodeURIComponent(JSON.stringify(p) ?? 'null')}`),
      })),
    },
    {
      weight: 2,
      arbitrary: slackCommand.map((f) => ({
        type: 'application/x-www-form-urlencoded',
        bytes: Buffer.from(
          new URLSearchParams(
            Object.entries(f).map(([k, v]): [string, string] => [
              k,
              typeof v === 'string' ? v : (JSON.stringify(v) ?? ''),
            ]),
          ).toString(),
        ),
      })),
    },
    {
      weight: 2,
      arbitrary: slackEvent.map((e) => ({ type: 'application/json', bytes: Buffer.from(JSON.stringify(e)) })),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          fc.constantFrom(
            'application/json',
            'application/x-www-form-urlencoded',
            'text/plain',
            'application/x-www-form-urlencoded; charset=utf-8',
          ),
          fc.uint8Array({ maxLength: 80 }),
        )
        .map(([type, b]) => ({ type, bytes: Buffer.from(b) })),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(
          'payload=null',
          'payload=',
          'payload=%7B',
          'payload=1&payload=2',
          'payload=%5B%5D',
          'payload=%22x%22',
        )
        .map((s) => ({ type: 'application/x-www-form-urlencoded', bytes: Buffer.from(s) })),
    },
  ),
  signing: fc.oneof(
    { weight: 8, arbitrary: fc.constant('valid') },
    { weight: 1, arbitrary: fc.constantFrom('none', 'wrong', 'stale', 'future', 'garbage-ts', 'lossy') },
  ),
  method: fc.oneof(
    { weight: 15, arbitrary: fc.constant('POST') },
    { weight: 1, arbitrary: fc.constantFrom('GET', 'PUT', 'DELETE', 'OPTIONS') },
  ),
  encoding: mostly(null, 15, fc.constantFrom('gzip', 'gzip-valid', 'deflate', 'br', 'snappy')),
});

function slackHeaders(signing: string, bytes: Buffer, type: string): Record<string, string> {
  const now = Math.floor(Date.now() / 1000);
  const ts = signing === 'stale' ? now - 3600 : signing === 'future' ? now + 3600 : now;
  const sign = (b: Buffer | string) => `v0=${createHmac('sha256', SECRET).update(`v0:${ts}:`).update(b).digest('hex')}`;
  const base = { 'content-type': type };
  switch (signing) {
    case 'none':
      return base;
    case 'wrong':
      return { ...base, 'x-slack-request-timestamp': String(ts), 'x-slack-signature': `v0=${'0'.repeat(64)}` };
    case 'garbage-ts':
      return { ...base, 'x-slack-request-timestamp': 'soon', 'x-slack-signature': sign(bytes) };
    case 'lossy':
      return { ...base, 'x-slack-request-timestamp': String(ts), 'x-slack-signature': sign(bytes.toString('utf8')) };
    default:
      return { ...base, 'x-slack-request-timestamp': String(ts), 'x-slack-signature': sign(bytes) };
  }
}

// ── the run ──────────────────────────────────────────────────────────────────────────────────
beforeAll(async () => {
  dns = await startDnsServer(() => ({ nxdomain: true })); // hermetic: no name resolves
  slack = await startSlack();
  h = await startHerald(
    {
      SLACK_SIGNING_SECRET: SECRET,
      SLACK_BOT_TOKEN: 'xoxb-fuzz',
      SLACK_API_URL: slack.apiUrl,
      HERALD_DNS_SERVERS: dns.address,
      HERALD_RATE_LIMIT: '100000000',
      HERALD_EXECUTE_RATE_LIMIT: '100000000',
      LOG_LEVEL: 'warn',
    },
    { worker: false, log: createLogger('warn', logs.sink) },
  );
  readerToken = await h.tokenWith(['incidents:read', 'templates:read']);
  raw = rawClient(h.url, { maxSockets: 4 });
}, 60_000);

afterAll(async () => {
  console.log(`fuzz: ${cases} requests in all (API and /slack/events); slowest API answer ${Math.round(slowest)} ms`);
  raw?.close();
  await h?.herald.slack?.stop();
  await h?.close();
  await slack?.close();
  await dns?.close();
});

describe('fuzzing', () => {
  it(`the API: ${API_RUNS} requests over every OpenAPI endpoint, never a 5xx, always problem+json, no hang`, async () => {
    const started = performance.now();
    await fc.assert(
      fc.asyncProperty(apiRequest, async (req) => {
        const template = req.op.path;
        // `!` marks a path outside /v1 (probes, metrics, the root).
        let path = (template.startsWith('!') ? template.slice(1) : `/v1${template}`)
          .replace('{id}', segFor(req.segs.id, kindOf(`/v1${template}`) ?? 'incidents'))
          .replace('{executionId}', segFor(req.segs.executionId, 'executions'))
          .replace('{n}', req.segs.n.rawSeg);
        if (req.query) path += `?${req.query.join('&')}`;
        let body = bodyBuffer(req.body);
        const headers: Record<string, string> = { ...authHeader(req.auth), ...req.extraHeaders };
        if (body !== undefined && req.contentType !== '') headers['content-type'] = req.contentType;
        if (body !== undefined && req.encoding) {
          if (req.encoding === 'gzip-valid') {
            body = gzipSync(body);
            headers['content-encoding'] = 'gzip';
          } else headers['content-encoding'] = req.encoding;
        }
        const r = await raw.send({ method: req.method, path, headers, body, timeoutMs: DEADLINE_MS });
        cases += 1;
        slowest = Math.max(slowest, r.ms);
        if (
          process.env.HERALD_FUZZ_DEBUG &&
          (r.ms > 100 ||
            (req.body.kind === 'json' &&
              r.status >= 400 &&
              r.status !== 404 &&
              req.auth === 'admin' &&
              req.oddMethod === null &&
              req.contentType === 'application/json' &&
              req.encoding === null))
        )
          console.log(
            `${Math.round(r.ms)}ms ${req.method} ${path.slice(0, 80)} ${r.status} ${r.text.slice(0, 200)} <= ${body?.toString('utf8').slice(0, 120)}`,
          );
        checkApiAnswer(req.method, path, r);
        record(req.method, path, r);
      }),
      { numRuns: API_RUNS, endOnFailure: true, ...SEED },
    );
    console.log(
      `fuzz: ${API_RUNS} API requests in ${Math.round(performance.now() - started)} ms; stored ${model.incidents.size} incidents, ${model.templates.size} templates, ${model.connections.size} connections, ${executions.length} executions`,
    );
  }, 240_000);

  it(`/slack/events: ${SLACK_RUNS} requests, signed and not, never a 5xx, always a Slack-shaped answer`, async () => {
    const started = performance.now();
    await fc.assert(
      fc.asyncProperty(slackRequest, async (req) => {
        const headers = slackHeaders(req.signing, req.body.bytes, req.body.type);
        let bytes = req.body.bytes;
        if (req.encoding === 'gzip-valid') {
          bytes = gzipSync(bytes);
          headers['content-encoding'] = 'gzip';
        } else if (req.encoding) headers['content-encoding'] = req.encoding;
        const r = await raw.send({
          method: req.method,
          path: '/slack/events',
          headers,
          body: req.method === 'GET' ? undefined : bytes,
          timeoutMs: DEADLINE_MS,
        });
        cases += 1;
        if (r.status >= 500)
          throw new Error(`/slack/events → ${r.status} for ${req.body.bytes.toString('utf8').slice(0, 300)}`);
        if (req.method !== 'POST') return; // the API's 404/405 problem, checked as such
        if (r.status === 200 && r.text !== '' && r.json === undefined)
          throw new Error(`/slack/events → 200 with a body that is not JSON: ${r.text.slice(0, 200)}`);
        // Bolt's answer to a request no listener acknowledged is a 404 after 3 s: refused here too.
        if (r.status !== 200 && ![400, 401, 413, 415].includes(r.status))
          throw new Error(`/slack/events → ${r.status}`);
        // A "lossy" signature (over the bytes decoded as UTF-8) is a valid one when they decode.
        const lossyIsExact =
          req.signing === 'lossy' && Buffer.from(req.body.bytes.toString('utf8')).equals(req.body.bytes);
        // A body that does not decode is refused before its signature is looked at.
        const undecodable = req.encoding !== null && req.encoding !== 'gzip-valid';
        if (req.signing !== 'valid' && !lossyIsExact && !undecodable && r.status !== 401)
          throw new Error(`/slack/events accepted a request signed "${req.signing}" (${r.status})`);
      }),
      { numRuns: SLACK_RUNS, endOnFailure: true, ...SEED },
    );
    console.log(`fuzz: ${SLACK_RUNS} Slack requests in ${Math.round(performance.now() - started)} ms`);
  }, 240_000);

  it('nothing was logged at error level', () => {
    const errors = logs.at('error');
    expect(errors.map((e) => `${String(e.msg)} ${JSON.stringify(e.err ?? '').slice(0, 300)}`)).toEqual([]);
  });

  it('afterwards the stored data is exactly what the 2xx answers made', async () => {
    for (const kind of ['incidents', 'templates', 'connections'] as const) {
      const stored = new Map<string, Record<string, unknown>>();
      let cursor: string | null = null;
      do {
        const page = await h.api(
          'GET',
          `/v1/${kind}?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        );
        expect(page.status).toBe(200);
        for (const item of page.body.data as Record<string, unknown>[]) stored.set(String(item.id), item);
        cursor = (page.body.next_cursor as string | null | undefined) ?? null;
      } while (cursor);
      expect([...stored.keys()].sort(), kind).toEqual([...model[kind].keys()].sort());
      for (const [id, expected] of model[kind]) {
        // What other requests change on the side (an execute stamps the incident, a test the
        // connection's health) and the webhook secret shown once, on create. Everything else
        // must be exactly what the last 2xx returned.
        const volatile = ['last_executed_at', 'updated_at', 'health', 'last_tested_at', 'last_test', 'signing_secret'];
        const strip = (o: Record<string, unknown>) =>
          Object.fromEntries(Object.entries(o).filter(([k]) => !volatile.includes(k)));
        const got = strip(stored.get(id)!);
        const want = strip(expected);
        if (JSON.stringify(got) !== JSON.stringify(want))
          console.log(`mismatch ${kind} ${id}:\n stored ${JSON.stringify(got)}\n model  ${JSON.stringify(want)}`);
        expect(got, `${kind} ${id}`).toEqual(want);
      }
    }
    console.log(
      `fuzz: stored data matches the model (${model.incidents.size} incidents, ${model.templates.size} templates, ${model.connections.size} connections)`,
    );
  });
});
