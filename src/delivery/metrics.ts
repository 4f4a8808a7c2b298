import { Counter, type Registry } from 'prom-client';
import type { Attempt, Delivery } from '../domain/execution/execution.js';

export interface DeliveryMetrics {
  /** Every recorded attempt (delivered, retryable/permanent failure, interrupted, cancelled). */
  attempt: (d: Delivery, a: Attempt) => void;
  /** Every change of a delivery; final states are counted. */
  changed: (d: Delivery) => void;
}

/** Delivery metrics: final states per channel type, and every attempt's outcome. */
export function deliveryMetrics(registry: Registry): DeliveryMetrics {
  const finished = new Counter({
    name: 'herald_deliveries_total',
    help: 'Deliveries that reached a final state, by channel type and status.',
    labelNames: ['type', 'status'] as const,
    registers: [registry],
  });
  const attempts = new Counter({
    name: 'herald_delivery_attempts_total',
    help: 'Delivery attempts by channel type and outcome (retries show as attempts outrunning deliveries).',
    labelNames: ['type', 'outcome'] as const,
    registers: [registry],
  });
  return {
    attempt: (d, a) => attempts.inc({ type: d.connection_type, outcome: a.outcome }),
    changed: (d) => {
      if (d.status === 'delivered' || d.status === 'failed' || d.status === 'cancelled')
        finished.inc({ type: d.connection_type, status: d.status });
    },
  };
}
