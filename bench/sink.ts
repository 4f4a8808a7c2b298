/**
 * The receiving end of the fan-out rows, in its own process: answers every POST /h/... with 200 at
 * once and records when each arrived (epoch ms, comparable with the harness's clock). Also a tiny
 * fake of Slack's Web API under /slack-api/ (every method answers {"ok":true}), for the Slack row.
 *   POST /__reset   forget the arrivals
 *   GET  /__stats   {"count","first","last","bodyBytes","slackApiCalls"}
 * Env: PORT (0: any). Prints {"listening": port}.
 */
import { createServer } from 'node:http';
import { epochMs, exitWithParent } from './lib.js';

exitWithParent();
let count = 0;
let first = 0;
let last = 0;
let bodyBytes = 0;
let slackApiCalls = 0;

const server = createServer((req, res) => {
  let bytes = 0;
  req.on('data', (c: Buffer) => {
    bytes += c.length;
  });
  req.on('end', () => {
    const url = req.url ?? '/';
    if (url.startsWith('/h/')) {
      const t = epochMs();
      if (count === 0) first = t;
      last = t;
      count++;
      bodyBytes = bytes;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    } else if (url.startsWith('/slack-api/')) {
      slackApiCalls++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    } else if (url === '/__reset') {
      count = 0;
      first = 0;
      last = 0;
      res.writeHead(204).end();
    } else if (url === '/__stats') {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ count, first, last, bodyBytes, slackApiCalls }));
    } else {
      res.writeHead(404).end();
    }
  });
});
server.keepAliveTimeout = 30_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const addr = server.address();
  process.stdout.write(`${JSON.stringify({ listening: typeof addr === 'object' && addr !== null ? addr.port : 0 })}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
