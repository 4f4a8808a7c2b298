import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request an event sink received. */
export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  json: {
    id: string;
    type: string;
    sequence: number | null;
    incident_id: string | null;
    data: Record<string, unknown>;
  };
}

/** What the sink answers the next request with (default 200 "ok"). */
export type Answer = { status: number; headers?: Record<string, string>; body?: string };

/**
 * A local HTTP receiver of integrator events (docs/events.md) for tests: records every request,
 * answers each with the next queued answer, or 200.
 */
export async function startEventSink(): Promise<{
  url: string;
  received: Received[];
  answers: Answer[];
  close(): Promise<void>;
}> {
  const received: Received[] = [];
  const answers: Answer[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({ headers: req.headers, body, json: JSON.parse(body) as Received['json'] });
      const a = answers.shift() ?? { status: 200, body: 'ok' };
      res.writeHead(a.status, a.headers ?? {}).end(a.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    answers,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
