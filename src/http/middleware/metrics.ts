import type { RequestHandler } from 'express';
import { Counter, Histogram, type Registry } from 'prom-client';

/**
 * Request metrics labelled by route pattern (never the raw path: ids would explode cardinality).
 */
export function httpMetrics(registry: Registry): RequestHandler {
  const requests = new Counter({
    name: 'herald_http_requests_total',
    help: 'HTTP requests by method, route and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'herald_http_request_duration_seconds',
    help: 'HTTP request duration by method and route.',
    labelNames: ['method', 'route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  return (req, res, next) => {
    const end = duration.startTimer();
    res.on('finish', () => {
      const routePath: unknown = (req.route as { path?: unknown } | undefined)?.path;
      const route = typeof routePath === 'string' ? `${req.baseUrl}${routePath}` : 'unmatched';
      requests.inc({ method: req.method, route, status: String(res.statusCode) });
      end({ method: req.method, route });
    });
    next();
  };
}
