import type { RedisClient as Redis } from './redis-connect.js';
import { isTerminal, type Delivery, type Execution } from '../domain/execution.js';
import type { Incident } from '../domain/incident.js';
import type { IncidentEvent } from '../domain/incident-event.js';
import type { Page, PageRequest } from '../domain/pagination.js';
import type { ExecutionRepo } from '../ports/index.js';
import { Change } from './commit.js';
import { loadJson, pageIndexes } from './index-page.js';
import type { Keys } from './keys.js';

/**
 * Executions and deliveries: `exe:<id>` and `dlv:<id>` JSON records, `inc:<id>:exes` (newest
 * first), `con:<id>:active` (non-terminal deliveries per connection) and the enqueue outbox.
 */
export class RedisExecutionRepo implements ExecutionRepo {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly nowMs: () => number = Date.now,
    /** The connection for the execute's commit (see BULK_COMMAND_TIMEOUT_MS); the same one by default. */
    private readonly bulk: Redis = redis,
  ) {}

  create(execution: Execution, deliveries: Delivery[], incidentPrev: Incident, incidentNext: Incident, events: IncidentEvent[]): Promise<boolean> {
    const k = this.keys;
    // Not connected yet (just started) or reconnecting: the bounded connection answers at once.
    const client = this.bulk.status === 'ready' ? this.bulk : this.redis;
    const change = new Change(client)
      .expect(k.incident(incidentPrev.id), JSON.stringify(incidentPrev))
      .write('SET', k.incident(incidentNext.id), JSON.stringify(incidentNext))
      .write('SET', k.execution(execution.id), JSON.stringify(execution))
      .write('ZADD', k.incidentExecutions(execution.incident_id), '0', execution.id);
    const now = String(this.nowMs());
    for (const d of deliveries) {
      change
        .write('SET', k.delivery(d.id), JSON.stringify(d))
        .write('SADD', k.connectionActiveDeliveries(d.connection_id), d.id)
        .write('ZADD', k.deliveryOutbox(), now, d.id);
    }
    if (events.length > 0) change.write('RPUSH', k.incidentEvents(incidentNext.id), ...events.map((e) => JSON.stringify(e)));
    return change.commit({ kind: 'execution', execution, deliveries });
  }

  async get(id: string): Promise<Execution | null> {
    const [e] = await loadJson<Execution>(this.redis, [this.keys.execution(id)]);
    return e ?? null;
  }

  async listForIncident(incidentId: string, page: PageRequest): Promise<Page<Execution>> {
    const { ids, nextCursor } = await pageIndexes(this.redis, [this.keys.incidentExecutions(incidentId)], page);
    const list = await loadJson<Execution>(this.redis, ids.map((id) => this.keys.execution(id)));
    return { data: list.filter((e): e is Execution => e !== null), nextCursor };
  }

  getDeliveries(ids: string[]): Promise<(Delivery | null)[]> {
    return loadJson<Delivery>(this.redis, ids.map((id) => this.keys.delivery(id)));
  }

  async getDelivery(id: string): Promise<Delivery | null> {
    const [d] = await this.getDeliveries([id]);
    return d ?? null;
  }

  updateDelivery(prev: Delivery, next: Delivery, opts: { outbox?: boolean; events?: IncidentEvent[] } = {}): Promise<boolean> {
    const k = this.keys;
    const change = new Change(this.redis).expect(k.delivery(prev.id), JSON.stringify(prev)).write('SET', k.delivery(next.id), JSON.stringify(next));
    if (opts.outbox) change.write('ZADD', k.deliveryOutbox(), String(this.nowMs()), next.id);
    // The timeline's `delivery.failed` is written with the failure itself: never one without the other.
    if (opts.events && opts.events.length > 0) change.write('RPUSH', k.incidentEvents(next.incident_id), ...opts.events.map((e) => JSON.stringify(e)));
    if (isTerminal(next.status)) change.write('SREM', k.connectionActiveDeliveries(next.connection_id), next.id);
    else change.write('SADD', k.connectionActiveDeliveries(next.connection_id), next.id);
    return change.commit();
  }

  activeForConnection(connectionId: string): Promise<string[]> {
    return this.redis.smembers(this.keys.connectionActiveDeliveries(connectionId));
  }

  pendingEnqueue(olderThanMs: number): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.deliveryOutbox(), '-inf', String(this.nowMs() - olderThanMs), 'LIMIT', 0, 1000);
  }

  async markEnqueued(ids: string[]): Promise<void> {
    if (ids.length > 0) await this.redis.zrem(this.keys.deliveryOutbox(), ...ids);
  }
}
