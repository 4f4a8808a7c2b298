// `npm run sink`: a tiny HTTP receiver for trying Herald locally. It prints every request it gets
// (method, path, the webhook-* headers and the body) and answers 200. Point a webhook connection
// at http://127.0.0.1:4000/… and start Herald with HERALD_OUTBOUND_ALLOW=127.0.0.1 so it may
// reach it. PORT=… picks another port.
import { createServer } from 'node:http';

const port = Number(process.env.PORT ?? 4000);
const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const signed = Object.entries(req.headers).filter(([k]) => k.startsWith('webhook-'));
    process.stdout.write(`${new Date().toISOString()} ${req.method} ${req.url}\n`);
    for (const [k, v] of signed) process.stdout.write(`  ${k}: ${String(v)}\n`);
    process.stdout.write(`  ${Buffer.concat(chunks).toString('utf8')}\n`);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
});
server.listen(port, '127.0.0.1', () => process.stdout.write(`sink listening on http://127.0.0.1:${port}\n`));
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => server.close(() => process.exit(0)));
