import http from 'node:http';
import { Writable } from 'node:stream';

/**
 * Raw HTTP for hostile tests: any method, any header bytes, any body bytes (fetch refuses many
 * of them), over one keep-alive agent, with a hard per-request deadline so a hang is a failure
 * and not a stuck test.
 */
export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text: string;
  /** Parsed JSON when the body parses, else undefined. */
  json: unknown;
  ms: number;
}

export interface RawRequest {
  method: string;
  path: string;
  headers?: Record<string, string | string[]>;
  body?: Buffer | string;
  timeoutMs?: number;
}

export function rawClient(baseUrl: string, opts: { maxSockets?: number } = {}) {
  const base = new URL(baseUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.maxSockets ?? 8 });
  function send(r: RawRequest): Promise<RawResponse> {
    const started = performance.now();
    const body = r.body === undefined ? undefined : Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body, 'utf8');
    const headers: Record<string, string | string[]> = { ...r.headers };
    if (
      body !== undefined &&
      !Object.keys(headers).some((k) => k.toLowerCase() === 'content-length' || k.toLowerCase() === 'transfer-encoding')
    )
      headers['content-length'] = String(body.length);
    return new Promise((resolve, reject) => {
      const req = http.request({
        host: base.hostname,
        port: base.port,
        method: r.method,
        path: r.path,
        headers,
        agent,
        insecureHTTPParser: false,
      });
      const timer = setTimeout(() => {
        req.destroy(new Error(`no answer to ${r.method} ${r.path.slice(0, 120)} within ${r.timeoutMs ?? 10_000} ms`));
      }, r.timeoutMs ?? 10_000);
      req.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (e) => {
          clearTimeout(timer);
          reject(e);
        });
        res.on('end', () => {
          clearTimeout(timer);
          const buf = Buffer.concat(chunks);
          const text = buf.toString('utf8');
          let json: unknown;
          try {
            json = text === '' ? undefined : JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: buf,
            text,
            json,
            ms: performance.now() - started,
          });
        });
      });
      req.end(body);
    });
  }
  return { send, close: () => agent.destroy() };
}

/** Collects pino's JSON lines (for "nothing was logged at error" and "a warn line was written"). */
export function logLines() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n')) {
        if (l.trim() === '') continue;
        try {
          lines.push(JSON.parse(l) as Record<string, unknown>);
        } catch {
          lines.push({ msg: l, level: 'unparsed' });
        }
      }
      done();
    },
  });
  return { sink, lines, at: (level: string) => lines.filter((l) => l.level === level) };
}
