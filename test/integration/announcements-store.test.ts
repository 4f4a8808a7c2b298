import type { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Incident } from '../../src/domain/incident/incident.js';
import { AnnouncementService } from '../../src/services/announcement-service.js';
import { Announcer } from '../../src/slack/announcer.js';
import type { SlackDeps } from '../../src/slack/deps.js';
import { createKeys } from '../../src/store/keys.js';
import { RedisAnnouncementRepo } from '../../src/store/announcements.js';
import { waitFor } from '../support/wait.js';
import { connectTestRedis, dropPrefix, uniquePrefix } from '../support/redis.js';
import { anIncident } from '../support/factories.js';
import { noPacing } from '../service/fakes.js';

let redis: Redis;
const prefix = uniquePrefix('ann');
let repo: RedisAnnouncementRepo;

beforeAll(() => {
  redis = connectTestRedis();
  repo = new RedisAnnouncementRepo(redis, createKeys(prefix));
});

afterAll(async () => {
  await dropPrefix(redis, prefix);
  await redis.quit();
});

describe('RedisAnnouncementRepo', () => {
  it('keeps the first announcement of an incident', async () => {
    expect(await repo.get('inc_a')).toBeNull();
    expect(await repo.create('inc_a', { channel: 'C1', ts: '1.1', execution_id: null })).toBe(true);
    expect(await repo.create('inc_a', { channel: 'C2', ts: '2.2', execution_id: null })).toBe(false);
    expect(await repo.get('inc_a')).toEqual({ channel: 'C1', ts: '1.1', execution_id: null });
  });

  it('follows the newest execution only, even when updates race', async () => {
    expect(await repo.trackExecution('inc_none', 'exe_1')).toBeNull();
    await repo.create('inc_b', { channel: 'C1', ts: '1.1', execution_id: null });
    const ids = ['exe_01JA00000000000000000000A1', 'exe_01JA00000000000000000000A3', 'exe_01JA00000000000000000000A2'];
    await Promise.all(ids.map((id) => repo.trackExecution('inc_b', id)));
    expect((await repo.get('inc_b'))?.execution_id).toBe('exe_01JA00000000000000000000A3');
    expect((await repo.trackExecution('inc_b', 'exe_01JA00000000000000000000A0'))?.execution_id).toBe(
      'exe_01JA00000000000000000000A3',
    );
  });
});

describe('refresh claims', () => {
  it('lets one refresher in at a time and makes it go again for a change seen meanwhile', async () => {
    expect(await repo.claimRefresh('inc_c', 'A', 10_000)).toBe(true);
    expect(await repo.claimRefresh('inc_c', 'B', 10_000)).toBe(false); // marks the change
    expect(await repo.finishRefresh('inc_c', 'A', 10_000)).toBe(true); // so A renders again
    expect(await repo.finishRefresh('inc_c', 'A', 10_000)).toBe(false); // nothing new: released
    expect(await repo.claimRefresh('inc_c', 'B', 10_000)).toBe(true);
    expect(await repo.finishRefresh('inc_c', 'A', 10_000)).toBe(false); // not A's any more
    expect(await repo.finishRefresh('inc_c', 'B', 10_000)).toBe(false);
  });

  it('recovers when a holder died: the claim expires, and a change marked meanwhile is still rendered', async () => {
    expect(await repo.claimRefresh('inc_d', 'DEAD', 50)).toBe(true);
    expect(await repo.claimRefresh('inc_d', 'B', 50)).toBe(false);
    await waitFor(async () => (await repo.claimRefresh('inc_d', 'C', 10_000)) && true, {
      what: 'the dead claim to expire',
    });
    expect(await repo.finishRefresh('inc_d', 'C', 10_000)).toBe(false);
  });
});

/**
 * Two processes (an API and a worker) refresh the same announcement: the first is slow to reach
 * Slack with an older state while the second already has a newer one. The message must end on the
 * newer state, whichever chat.update reaches Slack last.
 */
describe('announcement refreshes across processes', () => {
  const base: Incident = anIncident({ id: 'inc_race', title: 'Race' });

  it('never leaves an older state on show', async () => {
    let incident = base;
    const shown: string[] = []; // what Slack shows, in the order chat.update calls land
    const service = new AnnouncementService(repo);
    await service.remember('inc_race', 'C1', '1.1');
    const process = (gate: () => Promise<void>) => {
      const deps = {
        services: { incidents: { get: () => Promise.resolve(incident) }, announcements: service },
        client: {
          chat: {
            update: async (args: { blocks: unknown[] }) => {
              const status = /Investigating|Identified|Monitoring/.exec(JSON.stringify(args.blocks))![0];
              await gate();
              shown.push(status);
              return { ok: true };
            },
          },
        },
        settings: { admins: [], defaultChannel: null },
        log: pino({ level: 'silent' }),
        now: () => new Date(),
      } as unknown as SlackDeps;
      return new Announcer(deps, { pacer: noPacing });
    };
    let letApiGo!: () => void;
    const apiGate = new Promise<void>((r) => (letApiGo = r));
    let apiCalls = 0;
    const api = process(() => (++apiCalls === 1 ? apiGate : Promise.resolve()));
    const worker = process(() => Promise.resolve());

    incident = { ...base, status: 'identified' };
    api.refresh('inc_race'); // renders "Identified", then hangs on its way to Slack
    await waitFor(() => apiCalls === 1, { what: 'the API process to call chat.update' });
    incident = { ...base, status: 'monitoring' };
    worker.refresh('inc_race'); // sees the newer state while the API is still on its way
    await worker.idle();
    letApiGo();
    await api.idle();
    expect(shown.at(-1)).toBe('Monitoring');
  });
});
