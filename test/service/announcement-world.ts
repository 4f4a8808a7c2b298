import { AnnouncementRouter } from '../../src/services/announcement-router.js';
import { AnnouncementService } from '../../src/services/announcement-service.js';
import { FakeChat, InMemoryAnnouncementRepo, noPacing } from './fakes.js';
import { world } from './world.js';

/**
 * An AnnouncementRouter over the in-memory world and a fake Slack: what the announcement tests
 * share. Pacing is 1 ms, "now" is the world's clock, warnings are collected.
 */
export function routedAnnouncements(opts: { defaultChannel?: string | null } = {}) {
  const w = world();
  const chat = new FakeChat();
  const repo = new InMemoryAnnouncementRepo();
  const store = new AnnouncementService(repo);
  const warnings: string[] = [];
  const router = new AnnouncementRouter({
    store,
    incidents: w.services.incidents,
    executions: w.services.executions,
    connections: w.services.connections,
    chat,
    defaultChannel: opts.defaultChannel === undefined ? 'CDEFAULT' : opts.defaultChannel,
    pacing: { pacer: noPacing, postIntervalMs: 1, updateIntervalMs: 1 },
    log: { warn: (_o: object, msg: string) => void warnings.push(msg) },
    now: () => w.clock.now(),
  });
  return { w, chat, repo, store, router, warnings };
}
