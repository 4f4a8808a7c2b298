import { notFound } from '../domain/common/errors.js';
import { isId } from '../domain/common/ids.js';
import type { Delivery, Execution } from '../domain/execution/execution.js';
import type { ExecutionApprovals } from '../domain/execution/approval.js';
import type { Incident } from '../domain/incident/incident.js';
import type { ExecutionRepo, IncidentRepo, ThreadState } from '../ports/index.js';

/**
 * Reading what executions are made of, shared by execute and by corrections: the incident and the
 * execution (404 otherwise), the execution's deliveries in chunks, and each new delivery's place
 * in its connection's conversation.
 */

/** An execution and its deliveries, as stored: each edge (HTTP, Slack) presents them its own way. */
export interface ExecutionWithDeliveries {
  execution: Execution;
  deliveries: Delivery[];
  /** Its approvals, when some audience of it was held (merged into the execution when presented). */
  approvals?: ExecutionApprovals | null;
}

export async function incidentOr404(incidents: Pick<IncidentRepo, 'get'>, id: string): Promise<Incident> {
  const incident = isId('incident', id) ? await incidents.get(id) : null;
  if (!incident) throw notFound('Incident', id);
  return incident;
}

/** The execution, when it exists and belongs to the incident; 404 otherwise. */
export async function executionOr404(
  repo: Pick<ExecutionRepo, 'get'>,
  incidentId: string,
  executionId: string,
): Promise<Execution> {
  const execution = isId('execution', executionId) ? await repo.get(executionId) : null;
  if (!execution || execution.incident_id !== incidentId) throw notFound('Execution', executionId);
  return execution;
}

/** Deliveries read per round trip (each round trip lets other work run in between). */
const DELIVERY_READ_CHUNK = 200;

/**
 * The execution's deliveries, read in chunks: a fan-out of thousands of long messages is tens of
 * megabytes of JSON, and parsing it in one go would hold the event loop (and every Slack ack of
 * this process) for that long. The announcement's receipts read this on every refresh.
 */
export async function deliveriesOf(repo: Pick<ExecutionRepo, 'getDeliveries'>, e: Execution): Promise<Delivery[]> {
  const out: Delivery[] = [];
  for (let i = 0; i < e.delivery_ids.length; i += DELIVERY_READ_CHUNK) {
    const chunk = await repo.getDeliveries(e.delivery_ids.slice(i, i + DELIVERY_READ_CHUNK));
    for (const x of chunk) if (x !== null) out.push(x);
  }
  return out;
}

/**
 * Hands out each new delivery's place in its connection's conversation: the next sequence number
 * and the delivery before it (several templates to one connection follow one another).
 */
export function conversationPlaces(
  threads: Map<string, ThreadState>,
): (connectionId: string, deliveryId: string) => { sequence: number; previousDeliveryId: string | null } {
  const at = new Map([...threads].map(([k, v]) => [k, { sequence: v.sequence, last: v.lastDeliveryId }]));
  return (connectionId, deliveryId) => {
    const cur = at.get(connectionId) ?? { sequence: 0, last: null };
    at.set(connectionId, { sequence: cur.sequence + 1, last: deliveryId });
    return { sequence: cur.sequence + 1, previousDeliveryId: cur.last };
  };
}
