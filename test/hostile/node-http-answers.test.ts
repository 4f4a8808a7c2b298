import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerClientErrors } from '../../src/http/server.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { rawClient } from './raw-http.js';

/**
 * The answers Node's HTTP layer gives before Express sees a request — a bad `Expect` (417), a
 * request line that is not HTTP (400), headers over 16 KiB (431), a request that never finishes
 * arriving (408) — and the body reader's own refusals (413, 415) are problem+json like every
 * other refusal, read here off a raw socket.
 */

let h: TestHerald;
/** The app on a server set up as src/main.ts sets up its own (answerClientErrors), with fast timeouts for the 408. */
let server: Server;
let port: number;

beforeAll(async () => {
  h = await startHerald();
  server = createServer(
    { headersTimeout: 1_000, requestTimeout: 2_000, connectionsCheckingInterval: 100 },
    h.herald.app,
  );
  answerClientErrors(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => {
    server?.closeAllConnections();
    server?.close(() => resolve());
  });
  await h?.close();
});

/** Writes raw bytes on a fresh TCP connection (left open for writing when `keepOpen`) and reads until the server closes it. */
function rawTcp(bytes: string, opts: { keepOpen?: boolean } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(port, '127.0.0.1', () => (opts.keepOpen ? socket.write(bytes) : socket.end(bytes)));
    socket.setTimeout(20_000, () => socket.destroy(new Error('no answer within 20 s')));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

interface Parsed {
  status: number;
  headers: Map<string, string>;
  problem: Record<string, unknown>;
}

/** Parses one raw HTTP/1.1 answer whose body is complete (Content-Length). */
function parseAnswer(raw: string): Parsed {
  const split = raw.indexOf('\r\n\r\n');
  expect(split, raw.slice(0, 200)).toBeGreaterThan(0);
  const [statusLine, ...lines] = raw.slice(0, split).split('\r\n');
  const m = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine!);
  expect(m, statusLine).not.toBeNull();
  const headers = new Map(
    lines.map((l) => [l.slice(0, l.indexOf(':')).trim().toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
  );
  const body = raw.slice(split + 4);
  expect(Buffer.byteLength(body)).toBe(Number(headers.get('content-length')));
  return { status: Number(m![1]), headers, problem: JSON.parse(body) as Record<string, unknown> };
}

function expectProblem(a: Parsed, status: number, code: string): void {
  expect(a.status).toBe(status);
  expect(a.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(a.problem).toMatchObject({ status, code, type: `urn:herald:problem:${code}` });
  expect(typeof a.problem.title).toBe('string');
  expect(typeof a.problem.detail).toBe('string');
}

describe("Node's own answers are problem+json", () => {
  it('Expect: anything but 100-continue → 417 problem+json, connection closed, no route run', async () => {
    for (const expectation of ['200-ok', 'nonsense', '102-processing']) {
      const raw = await rawTcp(
        `POST /v1/incidents HTTP/1.1\r\nHost: x\r\nExpect: ${expectation}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
      );
      const a = parseAnswer(raw);
      expectProblem(a, 417, 'expectation_failed');
      expect(a.headers.get('connection')).toBe('close');
      expect(String(a.problem.detail)).toContain(expectation);
    }
  });

  it('a request line that is not HTTP → 400; headers over 16 KiB → 431; both with Connection: close', async () => {
    const garbage = parseAnswer(await rawTcp('GARBAGE / NOT-HTTP\r\n\r\n'));
    expectProblem(garbage, 400, 'bad_request');
    expect(garbage.headers.get('connection')).toBe('close');
    const badHeader = parseAnswer(await rawTcp('GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n'));
    expectProblem(badHeader, 400, 'bad_request');
    const huge = parseAnswer(
      await rawTcp(`GET /v1/incidents HTTP/1.1\r\nHost: x\r\nX-Long: ${'a'.repeat(20_000)}\r\n\r\n`),
    );
    expectProblem(huge, 431, 'request_headers_too_large');
    expect(huge.headers.get('connection')).toBe('close');
  });

  it('headers that never finish arriving → 408 problem+json', async () => {
    const raw = await rawTcp('GET /v1/incidents HTTP/1.1\r\nHost: x\r\nX-Slow: ', { keepOpen: true });
    const a = parseAnswer(raw);
    expectProblem(a, 408, 'request_timeout');
    expect(a.headers.get('connection')).toBe('close');
  });

  it("the body reader's 413 and 415 are problem+json too", async () => {
    const client = rawClient(`http://127.0.0.1:${port}`);
    try {
      const auth = { authorization: `Bearer ${h.token}` };
      const big = await client.send({
        method: 'POST',
        path: '/v1/incidents',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'x', severity: 'major', description: 'a'.repeat(300 * 1024) }),
      });
      expect(big.status).toBe(413);
      expect(big.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(big.json).toMatchObject({ status: 413, code: 'payload_too_large' });
      const wrongType = await client.send({
        method: 'POST',
        path: '/v1/incidents',
        headers: { ...auth, 'content-type': 'text/plain' },
        body: '{"title":"x","severity":"major"}',
      });
      expect(wrongType.status).toBe(415);
      expect(wrongType.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(wrongType.json).toMatchObject({ status: 415, code: 'unsupported_media_type' });
    } finally {
      client.close();
    }
  });
});
