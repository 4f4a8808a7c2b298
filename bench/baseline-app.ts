/**
 * The baseline for the API rows: a bare Express 5 + ioredis app, in its own process, answering the
 * same paths as Herald with the least Redis work that could serve them. No auth, no rate limit, no
 * validation beyond the shape, no events, no idempotency: what is left is Express, ioredis and JSON.
 *   GET  /v1/incidents/:id        one GET of a JSON string, sent as it is stored
 *   POST /v1/incidents            SET of the new incident's JSON + ZADD to the index (one MULTI)
 *   GET  /v1/incidents?limit=25   ZREVRANGE of the index + MGET of those incidents
 * Env: REDIS_URL, BASELINE_PREFIX (key prefix), PORT (0: any). Prints {"listening": port}.
 */
import { randomUUID } from 'node:crypto';
import express from 'express';
import { Redis } from 'ioredis';
import { exitWithParent } from './lib.js';

exitWithParent();
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
const prefix = process.env.BASELINE_PREFIX ?? 'baseline';
const incidentKey = (id: string) => `${prefix}:incident:${id}`;
const indexKey = `${prefix}:incidents`;

const app = express();
app.disable('x-powered-by');

app.get('/v1/incidents/:id', async (req, res) => {
  const json = await redis.get(incidentKey(req.params.id));
  if (json === null) {
    res.status(404).json({ code: 'not_found' });
    return;
  }
  res.type('application/json').send(json);
});

app.post('/v1/incidents', express.json({ limit: '256kb' }), async (req, res) => {
  const body = req.body as { title?: unknown; severity?: unknown; description?: unknown; impact?: unknown };
  if (typeof body.title !== 'string' || typeof body.severity !== 'string') {
    res.status(422).json({ code: 'validation_failed' });
    return;
  }
  const now = new Date().toISOString();
  const incident = {
    id: `inc_${randomUUID().replaceAll('-', '')}`,
    title: body.title,
    severity: body.severity,
    status: 'investigating',
    description: typeof body.description === 'string' ? body.description : '',
    impact: typeof body.impact === 'string' ? body.impact : '',
    resolution_summary: null,
    template_ids: [],
    created_by: { type: 'api_key', id: 'baseline', name: 'baseline' },
    created_at: now,
    updated_at: now,
    resolved_at: null,
    closed_at: null,
    revision: 1,
  };
  await redis
    .multi()
    .set(incidentKey(incident.id), JSON.stringify(incident))
    .zadd(indexKey, Date.now(), incident.id)
    .exec();
  res.status(201).location(`/v1/incidents/${incident.id}`).json(incident);
});

app.get('/v1/incidents', async (req, res) => {
  const limit = Math.min(100, Math.max(1, Number(req.query.limit ?? 25) || 25));
  const ids = await redis.zrevrange(indexKey, 0, limit - 1);
  const values = ids.length === 0 ? [] : await redis.mget(ids.map(incidentKey));
  const data = values.filter((v): v is string => v !== null).map((v) => JSON.parse(v) as unknown);
  res.json({ data, next_cursor: null });
});

const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const addr = server.address();
  process.stdout.write(`${JSON.stringify({ listening: typeof addr === 'object' && addr !== null ? addr.port : 0 })}\n`);
});
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  redis.disconnect();
  process.exit(0);
});
