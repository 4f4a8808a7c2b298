import { describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/common/actor.js';
import { newDelivery, type Delivery, type Execution } from '../../src/domain/execution/execution.js';
import { createdEventId, newEvent } from '../../src/domain/incident/incident-event.js';
import { newIncident, type Incident } from '../../src/domain/incident/incident.js';
import type { ConversationRepo, ExecutionRepo, IncidentRepo } from '../../src/ports/index.js';
import { RedisConversationRepo } from '../../src/store/conversations.js';
import { RedisExecutionRepo } from '../../src/store/executions.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { InMemoryConversationRepo, InMemoryExecutionRepo, InMemoryIncidentRepo } from '../service/fakes.js';
import { allPages, contractRedis, ids, plain } from './support.js';

/** The execution repository's contract, as ExecutionService and the delivery worker rely on it. */
const db = contractRedis('c-exe');
const actor: Actor = { type: 'api_key', id: 'key_01JABCDEFGHJKMNPQRSTVWXYZ0', name: 'contract' };
const NOW = '2026-11-22T10:00:00.000Z';

interface Store {
  repo: ExecutionRepo;
  incidents: IncidentRepo;
  conversations: ConversationRepo;
}

async function anIncident(s: Store): Promise<Incident> {
  const i = newIncident(
    ids.next('incident'),
    { title: 'Outage', severity: 'major', description: '', impact: '', template_ids: [] },
    actor,
    NOW,
  );
  const created = newEvent(createdEventId(i.id), 'incident.created', NOW, actor, {
    title: 'Outage',
    severity: 'major',
  });
  expect(await s.incidents.create(i, [created])).toBe(true);
  return i;
}

/** One execute of `incident` to `connections`, as ExecutionService builds it. */
function anExecute(incident: Incident, connections: string[]) {
  const executionId = ids.next('execution');
  const deliveries: Delivery[] = connections.map((connectionId) =>
    newDelivery({
      id: ids.next('delivery'),
      executionId,
      incidentId: incident.id,
      connectionId,
      connectionType: 'webhook',
      templateId: null,
      templateVersion: null,
      content: { subject: 'Outage', body: 'The primary is down.' },
    }),
  );
  const execution: Execution = {
    id: executionId,
    incident_id: incident.id,
    variables: {},
    created_at: NOW,
    template_versions: {},
    delivery_ids: deliveries.map((d) => d.id),
    kind: 'announcement',
    target_execution_id: null,
    note: null,
  };
  const next: Incident = {
    ...incident,
    execution_count: incident.execution_count + 1,
    last_executed_at: NOW,
    rev: incident.rev + 1,
  };
  return { execution, deliveries, next, events: [newEvent(ids.next('event'), 'incident.executed', NOW, actor)] };
}

function contract(make: () => Store) {
  it('commits an execute with its deliveries and the incident, and reads them back', async () => {
    const s = make();
    const incident = await anIncident(s);
    const [a, b] = [ids.next('connection'), ids.next('connection')];
    const x = anExecute(incident, [a, b]);
    expect(await s.repo.create(x.execution, x.deliveries, incident, x.next, x.events)).toBe(true);
    expect(plain(await s.repo.get(x.execution.id))).toEqual(x.execution);
    expect(plain(await s.repo.getDelivery(x.deliveries[0]!.id))).toEqual(x.deliveries[0]);
    expect(plain(await s.repo.getDeliveries([x.deliveries[1]!.id, ids.next('delivery')]))).toEqual([
      x.deliveries[1],
      null,
    ]);
    expect((await s.incidents.get(incident.id))?.execution_count).toBe(1);
    expect(await s.repo.activeForConnection(a)).toEqual([x.deliveries[0]!.id]);
    expect(await s.repo.get(ids.next('execution'))).toBeNull();
    expect(await s.repo.getDelivery(ids.next('delivery'))).toBeNull();
  });

  it('refuses an execute of an incident changed meanwhile, writing nothing', async () => {
    const s = make();
    const incident = await anIncident(s);
    const first = anExecute(incident, [ids.next('connection')]);
    expect(await s.repo.create(first.execution, first.deliveries, incident, first.next, first.events)).toBe(true);
    const stale = anExecute(incident, [ids.next('connection')]);
    expect(await s.repo.create(stale.execution, stale.deliveries, incident, stale.next, stale.events)).toBe(false);
    expect(await s.repo.get(stale.execution.id)).toBeNull();
    expect(await s.repo.getDelivery(stale.deliveries[0]!.id)).toBeNull();
    expect((await s.incidents.get(incident.id))?.execution_count).toBe(1);
  });

  it('refuses an execute whose conversation moved on since it was read, and moves it on itself', async () => {
    const s = make();
    let incident = await anIncident(s);
    const con = ids.next('connection');
    const read = await s.conversations.threads(incident.id, [con]);
    const first = anExecute(incident, [con]);
    expect(await s.repo.create(first.execution, first.deliveries, incident, first.next, first.events, read)).toBe(true);
    incident = first.next;
    const moved = await s.conversations.threads(incident.id, [con]);
    expect(moved.get(con)).toMatchObject({ sequence: 1, lastDeliveryId: first.deliveries[0]!.id });
    expect(moved.revision).not.toBeNull();
    expect(moved.revision).not.toBe(read.revision);
    // A second execute planned from the conversation as it was before the first.
    const late = anExecute(incident, [con]);
    expect(await s.repo.create(late.execution, late.deliveries, incident, late.next, late.events, read)).toBe(false);
    expect(await s.repo.get(late.execution.id)).toBeNull();
    expect((await s.incidents.get(incident.id))?.execution_count).toBe(1);
  });

  it("lists an incident's executions newest first, paged with the cursor", async () => {
    const s = make();
    let incident = await anIncident(s);
    const other = await anIncident(s);
    const made: string[] = [];
    for (let n = 0; n < 5; n++) {
      const x = anExecute(incident, [ids.next('connection')]);
      expect(await s.repo.create(x.execution, x.deliveries, incident, x.next, x.events)).toBe(true);
      incident = x.next;
      made.push(x.execution.id);
    }
    const pages = await allPages((p) => s.repo.listForIncident(incident.id, p), 2);
    expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
    expect(pages.flat().map((e) => e.id)).toEqual(made.reverse());
    expect((await s.repo.listForIncident(other.id, { limit: 10, cursor: null })).data).toEqual([]);
  });

  it('updates a delivery by compare-and-set, and keeps the active index in step', async () => {
    const s = make();
    const incident = await anIncident(s);
    const con = ids.next('connection');
    const x = anExecute(incident, [con]);
    await s.repo.create(x.execution, x.deliveries, incident, x.next, x.events);
    const queued = x.deliveries[0]!;
    const sending: Delivery = { ...queued, status: 'sending', sending_since: NOW, rev: queued.rev + 1 };
    expect(await s.repo.updateDelivery(queued, sending)).toBe(true);
    expect(await s.repo.updateDelivery(queued, { ...queued, status: 'cancelled', rev: queued.rev + 1 })).toBe(false);
    expect(plain(await s.repo.getDelivery(queued.id))).toEqual(sending);
    expect(await s.repo.activeForConnection(con)).toEqual([queued.id]);
    const delivered: Delivery = {
      ...sending,
      status: 'delivered',
      sending_since: null,
      delivered_at: NOW,
      finished_at: NOW,
      rev: sending.rev + 1,
    };
    expect(await s.repo.updateDelivery(sending, delivered)).toBe(true);
    expect(await s.repo.activeForConnection(con)).toEqual([]);
  });
}

describe.each<[string, () => Store]>([
  [
    'in-memory',
    () => {
      const incidents = new InMemoryIncidentRepo();
      const conversations = new InMemoryConversationRepo();
      return { repo: new InMemoryExecutionRepo(incidents, conversations), incidents, conversations };
    },
  ],
  [
    'redis',
    () => {
      const keys = db.keys();
      return {
        repo: new RedisExecutionRepo(db.redis(), keys),
        incidents: new RedisIncidentRepo(db.redis(), keys),
        conversations: new RedisConversationRepo(db.redis(), keys),
      };
    },
  ],
])('ExecutionRepo contract: %s', (_name, make) => contract(make));
