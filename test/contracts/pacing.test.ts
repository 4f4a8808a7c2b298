import { describe, expect, it } from 'vitest';
import { startSending } from '../../src/domain/execution/delivery-state.js';
import type { PaceStep } from '../../src/domain/execution/delivery-policy.js';
import { newDelivery, type Delivery } from '../../src/domain/execution/execution.js';
import type { ExecutionRepo } from '../../src/ports/index.js';
import type { SendPacer } from '../../src/services/deliveries.js';
import { RedisExecutionRepo } from '../../src/store/executions.js';
import { RedisPacer } from '../../src/store/pacing.js';
import { FakeClock, FakeSendPacer, InMemoryExecutionRepo, InMemoryIncidentRepo } from '../service/fakes.js';
import { contractRedis, ids, plain, type Make } from './support.js';

/**
 * The send pacer's contract, as the delivery engine relies on it. The fake runs on a fake clock
 * that never moves here, Redis on its own TIME: the rules are slow (one send a minute) so that
 * however busy the machine, the milliseconds Redis' clock moves during a test are far inside the
 * bounds. `put` stores a delivery as the engine would read it; `repo` reads it back.
 */
interface Harness {
  pacer: SendPacer;
  repo: Pick<ExecutionRepo, 'getDeliveries'>;
  put(d: Delivery): Promise<Delivery>;
}

const db = contractRedis('c-pace');

function redisHarness(): Harness {
  const keys = db.keys();
  const redis = db.redis();
  const repo = new RedisExecutionRepo(redis, keys);
  return {
    pacer: new RedisPacer(redis, keys),
    repo,
    async put(d) {
      await redis.set(keys.delivery(d.id), JSON.stringify(d));
      return (await repo.getDeliveries([d.id]))[0]!;
    },
  };
}

function fakeHarness(): Harness {
  const repo = new InMemoryExecutionRepo(new InMemoryIncidentRepo());
  return {
    pacer: new FakeSendPacer(new FakeClock(), repo),
    repo,
    async put(d) {
      repo.deliveries.set(d.id, structuredClone(d));
      return (await repo.getDeliveries([d.id]))[0]!;
    },
  };
}

const MINUTE = 60_000;
const perMinute = (burst = 1) => ({ perSecond: 1 / 60, burst });
/** A wait of about `ms`: never more, and less only by what Redis' clock moved meanwhile. */
const about = (ms: number) => expect.toSatisfy((w: number) => w <= ms && w > ms - 5_000, `about ${ms} ms`);
const waitOf = (s: PaceStep | null): number => (s === null || s.step === 'send' ? 0 : s.waitMs);

function queued(connectionId: string): Delivery {
  return newDelivery({
    id: ids.next('delivery'),
    executionId: ids.next('execution'),
    incidentId: ids.next('incident'),
    connectionId,
    connectionType: 'webhook',
    templateId: null,
    templateVersion: null,
    content: { subject: 'S', body: 'B' },
  });
}

function contract(make: Make<Harness>) {
  it('reserves one slot per call: a burst back to back, then one a slot apart, per connection', async () => {
    const { pacer } = make();
    const [con, other] = [ids.next('connection'), ids.next('connection')];
    const waits: number[] = [];
    for (let n = 0; n < 5; n++) waits.push(await pacer.reserve(con, perMinute(3)));
    expect(waits.slice(0, 3)).toEqual([0, 0, 0]);
    expect(waits[3]).toEqual(about(MINUTE));
    expect(waits[4]).toEqual(about(2 * MINUTE));
    expect(await pacer.reserve(other, perMinute(3))).toBe(0);
  });

  it('takes a send token only when one is free now, and asking again takes nothing', async () => {
    const { pacer } = make();
    const con = ids.next('connection');
    expect(await pacer.take(con, perMinute())).toBe(0);
    for (let n = 0; n < 3; n++) expect(await pacer.take(con, perMinute())).toEqual(about(MINUTE));
  });

  it('paceSend: reserveFirst reserves a slot then takes a token; holding a slot, it only asks for the token', async () => {
    const { pacer } = make();
    const con = ids.next('connection');
    expect(await pacer.paceSend(con, perMinute(), true)).toEqual({ step: 'send' });
    const second = await pacer.paceSend(con, perMinute(), true);
    expect(second).toEqual({ step: 'reserved', waitMs: about(MINUTE) });
    // Woken at its slot, it holds it: only a send token is asked for, none is free yet, none taken.
    const token = await pacer.paceSend(con, perMinute(), false);
    expect(token).toEqual({ step: 'take', waitMs: about(MINUTE) });
    expect(waitOf(await pacer.paceSend(con, perMinute(), false))).toEqual(about(MINUTE));
    // The schedule is the same one reserve uses: the slot after the two taken.
    expect(await pacer.reserve(con, perMinute())).toEqual(about(2 * MINUTE));
  });

  it('forgets reserved slots and taken tokens on reset', async () => {
    const { pacer } = make();
    const con = ids.next('connection');
    await pacer.reserve(con, perMinute());
    await pacer.reserve(con, perMinute());
    await pacer.take(con, perMinute());
    await pacer.reset(con);
    expect(await pacer.paceSend(con, perMinute(), true)).toEqual({ step: 'send' });
  });

  it('paceAndStart writes the `sending` record only when it may send now', async () => {
    const h = make();
    const con = ids.next('connection');
    const first = await h.put(queued(con));
    const firstSending = startSending(first, new Date()) as Delivery;
    expect(await h.pacer.paceAndStart(first, firstSending, perMinute(), true)).toEqual({ step: 'send' });
    expect(plain((await h.repo.getDeliveries([first.id]))[0])).toEqual(plain(firstSending));
    const next = await h.put(queued(con));
    const nextSending = startSending(next, new Date()) as Delivery;
    expect(await h.pacer.paceAndStart(next, nextSending, perMinute(), true)).toEqual({
      step: 'reserved',
      waitMs: about(MINUTE),
    });
    expect(await h.pacer.paceAndStart(next, nextSending, perMinute(), false)).toEqual({
      step: 'take',
      waitMs: about(MINUTE),
    });
    expect(plain((await h.repo.getDeliveries([next.id]))[0])).toEqual(plain(next));
  });

  it('paceAndStart over a delivery changed since it was read answers null and takes no slot or token', async () => {
    const h = make();
    const con = ids.next('connection');
    const read = await h.put(queued(con));
    const cancelled = await h.put({ ...read, status: 'cancelled', rev: read.rev + 1 });
    expect(await h.pacer.paceAndStart(read, startSending(read, new Date()) as Delivery, perMinute(), true)).toBeNull();
    expect(plain((await h.repo.getDeliveries([read.id]))[0])).toEqual(plain(cancelled));
    expect(await h.pacer.paceSend(con, perMinute(), true)).toEqual({ step: 'send' });
  });
}

describe.each<[string, Make<Harness>]>([
  ['in-memory', fakeHarness],
  ['redis', redisHarness],
])('SendPacer contract: %s', (_name, make) => contract(make));
