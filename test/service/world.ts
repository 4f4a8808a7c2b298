/**
 * The services wired over the in-memory fakes by the production wiring itself
 * (src/composition/services.ts, buildServices): one call gives a fresh, isolated world per test.
 */
import type { ChannelSenders } from '../../src/ports/index.js';
import { buildServices, LateReminderNotifier, type ServicePorts } from '../../src/composition/services.js';
import { THREAD_WAIT_DEFAULT_MS } from '../../src/services/deliveries.js';
import type { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import {
  allowNone,
  FakeClock,
  FakeQueue,
  FakeSecretBox,
  FakeTester,
  FakeTokenCrypto,
  InMemoryAnnouncementRepo,
  InMemoryAudienceRepo,
  InMemoryApiKeyRepo,
  InMemoryConnectionRepo,
  InMemoryConversationRepo,
  InMemoryExecutionRepo,
  InMemoryIncidentRepo,
  InMemoryTemplateRepo,
  noPacing,
  sendPacerOver,
  SeqIds,
  slackActor,
} from './fakes.js';

export interface WorldOptions {
  /** What the connection tester answers (default: ok). */
  tester?: FakeTester;
  publicUrl?: string;
  /** HERALD_OUTBOUND_ALLOW (default: nothing beyond public destinations). */
  allow?: OutboundAllow;
  /** HERALD_SLACK_ADMINS (default: the fakes' `slackActor`, so admin work by it is allowed). */
  slackAdmins?: string[];
  /** The reminders' schedule, cadence and notifier (default: noReminders()). */
  reminders?: ServicePorts['reminders'];
}

/**
 * The reminders' ports where no test runs reminders: nothing is ever due, nobody is told. The
 * reminders over the real store are test/integration/reminders.test.ts's.
 */
export const noReminders = (): ServicePorts['reminders'] => ({
  schedule: { claimDue: () => Promise.resolve([]), release: () => Promise.resolve() },
  repeatMs: 60 * 60_000,
  leaseMs: 10_000,
  notifier: new LateReminderNotifier(),
});

export function world(opts: WorldOptions = {}) {
  const clock = new FakeClock();
  const ids = new SeqIds();
  const box = new FakeSecretBox();
  const incidentRepo = new InMemoryIncidentRepo();
  const templateRepo = new InMemoryTemplateRepo();
  const connectionRepo = new InMemoryConnectionRepo();
  const audienceRepo = new InMemoryAudienceRepo();
  audienceRepo.connectionExists = (id) => connectionRepo.connections.has(id);
  audienceRepo.templateExists = (id) => templateRepo.templates.has(id);
  connectionRepo.audiences = audienceRepo;
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
    opts.tester ??
    new FakeTester(() => ({
      ok: true,
      status: 'ok',
      method: 'check',
      sent_message: false,
      http_status: 200,
      provider_code: null,
      latency_ms: 5,
      checked_at: clock.now().toISOString(),
      detail: '',
    }));

  const services = buildServices({
    clock,
    ids,
    random: () => 0.5,
    repos: {
      incidents: incidentRepo,
      templates: templateRepo,
      connections: connectionRepo,
      apiKeys: apiKeyRepo,
      executions: executionRepo,
      conversations,
      announcements: new InMemoryAnnouncementRepo(),
      audiences: audienceRepo,
    },
    exist: {
      templates: (tids) => Promise.resolve(tids.map((t) => templateRepo.templates.has(t))),
      connections: (cids) => Promise.resolve(cids.map((c) => connectionRepo.connections.has(c))),
    },
    box,
    crypto: new FakeTokenCrypto(),
    allow: opts.allow ?? allowNone,
    tester,
    // No test here sends: the delivery engine's sends are test/service/deliveries.test.ts's.
    senders: {} as ChannelSenders,
    pacer: sendPacerOver(noPacing, executionRepo),
    queue,
    publicUrl: opts.publicUrl ?? 'https://herald.example.com',
    threadWaitMs: THREAD_WAIT_DEFAULT_MS,
    slackAdmins: opts.slackAdmins ?? [slackActor.id],
    reminders: opts.reminders ?? noReminders(),
    notices: {
      incidentChanged: (incident, kind) => void changes.push({ id: incident.id, kind }),
      connectionGone: (id, reason) => void (reason === 'connection deleted' ? deleted : disabled).push(id),
      deliveryTrouble: (what) => void errors.push(what),
      executeTrouble: (what) => void errors.push(what),
    },
  });

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
      audiences: audienceRepo,
    },
    services,
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
