/**
 * The services wired over the in-memory fakes the way the composition root wires them over Redis
 * (src/composition/): one call gives a fresh, isolated world per test.
 */
import type { ChannelSenders, DeliveryTarget } from '../../src/ports/index.js';
import { ApiKeyService } from '../../src/services/api-keys.js';
import { ConnectionService } from '../../src/services/connections.js';
import { DeliveryService } from '../../src/services/deliveries.js';
import { ExecutionService } from '../../src/services/executions.js';
import { IncidentService } from '../../src/services/incidents.js';
import { TemplateService } from '../../src/services/templates.js';
import type { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import type { Incident } from '../../src/domain/incident/incident.js';
import {
  allowNone,
  FakeClock,
  FakeQueue,
  FakeSecretBox,
  FakeTester,
  FakeTokenCrypto,
  InMemoryApiKeyRepo,
  InMemoryConnectionRepo,
  InMemoryConversationRepo,
  InMemoryExecutionRepo,
  InMemoryIncidentRepo,
  InMemoryTemplateRepo,
  noPacing,
  SeqIds,
} from './fakes.js';

export interface WorldOptions {
  /** What the connection tester answers (default: ok). */
  tester?: FakeTester | null;
  publicUrl?: string;
  /** HERALD_OUTBOUND_ALLOW (default: nothing beyond public destinations). */
  allow?: OutboundAllow;
}

export function world(opts: WorldOptions = {}) {
  const clock = new FakeClock();
  const ids = new SeqIds();
  const box = new FakeSecretBox();
  const crypto = new FakeTokenCrypto();
  const incidentRepo = new InMemoryIncidentRepo();
  const templateRepo = new InMemoryTemplateRepo();
  const connectionRepo = new InMemoryConnectionRepo();
  const conversations = new InMemoryConversationRepo();
  const executionRepo = new InMemoryExecutionRepo(incidentRepo, conversations);
  const apiKeyRepo = new InMemoryApiKeyRepo();
  const queue = new FakeQueue();
  incidentRepo.templateExists = (id) => templateRepo.templates.has(id);
  const changes: { id: string; kind: 'created' | 'updated' | 'closed' }[] = [];
  const deleted: string[] = [];
  const disabled: string[] = [];
  const errors: string[] = [];
  const tester =
    opts.tester === undefined
      ? new FakeTester(() => ({
          ok: true,
          status: 'ok',
          method: 'check',
          sent_message: false,
          http_status: 200,
          provider_code: null,
          latency_ms: 5,
          checked_at: clock.now().toISOString(),
          detail: '',
        }))
      : opts.tester;

  const incidents = new IncidentService({
    incidents: incidentRepo,
    templatesExist: (tids) => Promise.resolve(tids.map((t) => templateRepo.templates.has(t))),
    templateVariables: (tids) =>
      Promise.resolve(tids.map((t) => templateRepo.templates.get(t)?.variables.map((v) => v.name) ?? null)),
    clock,
    ids,
    onChange: (incident: Incident, kind) => changes.push({ id: incident.id, kind }),
  });
  const connections = new ConnectionService({
    repo: connectionRepo,
    box,
    clock,
    ids,
    crypto,
    allow: opts.allow ?? allowNone,
    ...(tester ? { tester } : {}),
    onDeleted: (id) => void deleted.push(id),
    onDisabled: (id) => void disabled.push(id),
  });
  const templates = new TemplateService({
    templates: templateRepo,
    clock,
    ids,
    getIncident: (id) => incidentRepo.get(id),
    connectionsExist: (cids) => Promise.resolve(cids.map((c) => connectionRepo.connections.has(c))),
    publicUrl: opts.publicUrl ?? 'https://herald.example.com',
  });
  const deliveries = new DeliveryService({
    repo: executionRepo,
    targets: {
      get: (id: string): Promise<DeliveryTarget | null> => connections.getForDelivery(id),
      disable: (id: string, reason: string) => connections.disable(id, reason).then(() => undefined),
      recordOutcome: () => Promise.resolve(),
    },
    senders: {} as ChannelSenders,
    pacer: noPacing,
    queue,
    clock,
    ids,
    random: () => 0.5,
    getIncident: (id) => incidentRepo.get(id),
    conversations,
    publicUrl: opts.publicUrl ?? 'https://herald.example.com',
    onError: (what) => void errors.push(what),
  });
  const executions = new ExecutionService({
    incidents: incidentRepo,
    repo: executionRepo,
    deliveries,
    getTemplates: (tids) => templates.getMany(tids),
    getTemplateVersion: (tid, version) => templates.getVersionOrNull(tid, version),
    conversations,
    listConnections: () => connections.listAll(),
    enqueue: (jobs) => queue.enqueue(jobs),
    clock,
    ids,
    publicUrl: opts.publicUrl ?? 'https://herald.example.com',
    onError: (what) => void errors.push(what),
  });
  const apiKeys = new ApiKeyService({ repo: apiKeyRepo, clock, ids, crypto });

  return {
    clock,
    ids,
    box,
    queue,
    tester,
    repos: {
      incidents: incidentRepo,
      templates: templateRepo,
      connections: connectionRepo,
      executions: executionRepo,
      apiKeys: apiKeyRepo,
    },
    services: { incidents, templates, connections, executions, deliveries, apiKeys },
    seen: { changes, deleted, disabled, errors },
  };
}

export type World = ReturnType<typeof world>;

/** A webhook connection body (public destination, no secrets needed). */
export const webhookBody = (name = 'Hook', over: Record<string, unknown> = {}) => ({
  name,
  type: 'webhook',
  config: { url: 'https://hooks.example.com/herald' },
  ...over,
});
