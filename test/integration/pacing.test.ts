import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { startSending } from '../../src/domain/execution/delivery-state.js';
import { newDelivery, type Delivery } from '../../src/domain/execution/execution.js';
import { RedisExecutionRepo } from '../../src/store/executions.js';
import { createKeys } from '../../src/store/keys.js';
import { RedisPacer } from '../../src/store/pacing.js';
import { connectTestRedis, dropPrefix, notingCalls, uniquePrefix } from '../support/redis.js';

let redis: Redis;
const prefix = uniquePrefix('pace');
const keys = createKeys(prefix);
let pacer: RedisPacer;

beforeAll(() => {
  redis = connectTestRedis();
  pacer = new RedisPacer(redis, keys);
});
afterAll(async () => {
  await dropPrefix(redis, prefix);
  await redis.quit();
});

describe('RedisPacer (GCRA token bucket with reservations)', () => {
  it('lets a burst through, then reserves the next slots one interval apart', async () => {
    const rule = { perSecond: 2.5, burst: 5 };
    const waits: number[] = [];
    const startedAt: number[] = [];
    for (let i = 0; i < 7; i++) {
      startedAt.push(performance.now());
      waits.push(await pacer.reserve('con_burst', rule));
    }
    // Five slots back to back, then one every 400 ms counted from the first: a call Redis runs
    // e ms after the first waits 400 − e (slot 6) or 800 − e (slot 7). The elapsed times are
    // measured, not assumed small, so a busy machine that spaces the calls out does not fail the
    // rule. Redis ran call n after it was sent (startedAt[n − 1]) and before the next was
    // (startedAt[n]), which bounds e from both sides.
    expect(waits.slice(0, 5)).toEqual([0, 0, 0, 0, 0]);
    const endedAt = performance.now();
    const at = (n: number) => startedAt[n - 1]!;
    const slack = 25; // Redis' clock against ours, and rounding up to whole ms
    expect(waits[5]).toBeLessThanOrEqual(400 - Math.max(0, at(6) - at(2)) + slack);
    expect(waits[5]).toBeGreaterThanOrEqual(400 - (at(7) - at(1)) - slack);
    expect(waits[6]).toBeLessThanOrEqual(800 - Math.max(0, at(7) - at(2)) + slack);
    expect(waits[6]).toBeGreaterThanOrEqual(800 - (endedAt - at(1)) - slack);
  });

  it('holds a 1/s connection to one message per second and keeps connections apart', async () => {
    const rule = { perSecond: 1, burst: 1 };
    expect(await pacer.reserve('con_a', rule)).toBe(0);
    const wait = await pacer.reserve('con_a', rule);
    expect(wait).toBeGreaterThan(900);
    expect(await pacer.reserve('con_b', rule)).toBe(0);
  });

  it('gives concurrent takers distinct slots in order: a backlog asks once each, no herd', async () => {
    const rule = { perSecond: 1, burst: 1 };
    const waits = (await Promise.all(Array.from({ length: 10 }, () => pacer.reserve('con_race', rule)))).sort(
      (a, b) => a - b,
    );
    expect(waits[0]).toBe(0);
    // Slot n is n seconds out (give or take Redis' clock between the calls).
    waits.forEach((w, n) => expect(Math.abs(w - n * 1000)).toBeLessThan(100));
  });

  it('forgets reserved slots on reset (their deliveries were cancelled)', async () => {
    const rule = { perSecond: 1 / 60, burst: 1 };
    expect(await pacer.reserve('con_reset', rule)).toBe(0);
    expect(await pacer.reserve('con_reset', rule)).toBeGreaterThan(59_000);
    expect(await pacer.take('con_reset', rule)).toBe(0);
    await pacer.reset('con_reset');
    expect(await pacer.reserve('con_reset', rule)).toBe(0);
    expect(await pacer.take('con_reset', rule)).toBe(0);
  });

  it('the send bucket grants a token only when one is free now, and takes nothing otherwise', async () => {
    const rule = { perSecond: 1, burst: 1 };
    expect(await pacer.take('con_send', rule)).toBe(0);
    const waits = await Promise.all(Array.from({ length: 5 }, () => pacer.take('con_send', rule)));
    // Nobody got a token, and asking did not push the next free token further out.
    for (const w of waits) {
      expect(w).toBeGreaterThan(900);
      expect(w).toBeLessThanOrEqual(1000);
    }
  });

  it('paceSend is reserve then take in one step: it reserves a slot once, and takes a token only when its slot is now', async () => {
    const rule = { perSecond: 1, burst: 1 };
    // A fresh connection: its slot is now, and so is a send token.
    expect(await pacer.paceSend('con_both', rule, true)).toEqual({ step: 'send' });
    // The next one reserves the following slot, a second out, and takes no token.
    const second = await pacer.paceSend('con_both', rule, true);
    expect(second.step).toBe('reserved');
    expect(second.step === 'send' ? 0 : second.waitMs).toBeGreaterThan(900);
    // Holding that slot already (reserveFirst false), it only asks for a token: none is free yet.
    const token = await pacer.paceSend('con_both', rule, false);
    expect(token.step).toBe('take');
    expect(token.step === 'send' ? 0 : token.waitMs).toBeGreaterThan(900);
    // The same keys as reserve and take: the schedule is a slot further out for the next caller.
    expect(await pacer.reserve('con_both', rule)).toBeGreaterThan(1900);
  });

  describe('paceAndStart: pacing and the `sending` mark in one step', () => {
    const ids = createIdGenerator();
    /** A queued delivery stored as the engine reads it, and the `sending` record it would write. */
    async function queued(connectionId = ids.next('connection')): Promise<{ read: Delivery; sending: Delivery }> {
      const d = newDelivery({
        id: ids.next('delivery'),
        executionId: ids.next('execution'),
        incidentId: ids.next('incident'),
        connectionId,
        connectionType: 'webhook',
        templateId: null,
        templateVersion: null,
        content: { subject: 'S', body: 'B' },
      });
      await redis.set(keys.delivery(d.id), JSON.stringify(d));
      const [read] = await new RedisExecutionRepo(redis, keys).getDeliveries([d.id]);
      return { read: read!, sending: startSending(read!, new Date()) as Delivery };
    }
    const stored = async (d: Delivery): Promise<Delivery> =>
      JSON.parse((await redis.get(keys.delivery(d.id)))!) as Delivery;

    it('with a slot and a token now, writes the `sending` record over the one read and keeps the active index', async () => {
      const { read, sending } = await queued();
      expect(await pacer.paceAndStart(read, sending, { perSecond: 1, burst: 1 }, true)).toEqual({ step: 'send' });
      expect(await stored(read)).toEqual(sending);
      expect(await redis.sismember(keys.connectionActiveDeliveries(read.connection_id), read.id)).toBe(1);
      // The text written is what the next compare-and-set expects.
      const delivered: Delivery = { ...sending, status: 'delivered', rev: sending.rev + 1 };
      expect(await new RedisExecutionRepo(redis, keys).updateDelivery(sending, delivered)).toBe(true);
    });

    it('when it must wait, writes nothing and says how long: its reserved slot, or a send token', async () => {
      // One send every 10 s: however slow the machine, the next slot and token are still ahead.
      const rule = { perSecond: 0.1, burst: 1 };
      const first = await queued();
      expect(await pacer.paceAndStart(first.read, first.sending, rule, true)).toEqual({ step: 'send' });
      // Another delivery to the same connection: its slot is a second out, and reserved now.
      const { read, sending } = await queued(first.read.connection_id);
      const reserved = await pacer.paceAndStart(read, sending, rule, true);
      expect(reserved?.step).toBe('reserved');
      expect(reserved !== null && reserved.step !== 'send' ? reserved.waitMs : 0).toBeGreaterThan(0);
      expect(await stored(read)).toEqual(read);
      // Holding that slot, it asks only for a token, and none is free yet: still nothing written.
      const token = await pacer.paceAndStart(read, sending, rule, false);
      expect(token?.step).toBe('take');
      expect(await stored(read)).toEqual(read);
      expect(await redis.sismember(keys.connectionActiveDeliveries(read.connection_id), read.id)).toBe(0);
    });

    it('starts the deliveries of one turn in one script, each paced by its own connection and rule', async () => {
      const { client: counting, calls: scripts } = notingCalls(redis, ['evalsha', 'eval']);
      const batched = new RedisPacer(counting, keys);
      const slow = { perSecond: 0.1, burst: 1 };
      const fast = { perSecond: 100, burst: 10 };
      const slowOne = await queued();
      const slowTwo = await queued(slowOne.read.connection_id);
      const fastOne = await queued();
      const stale = await queued(fastOne.read.connection_id);
      await redis.set(keys.delivery(stale.read.id), JSON.stringify({ ...stale.read, rev: stale.read.rev + 1 }));
      const steps = await Promise.all([
        batched.paceAndStart(slowOne.read, slowOne.sending, slow, true),
        batched.paceAndStart(slowTwo.read, slowTwo.sending, slow, true),
        batched.paceAndStart(stale.read, stale.sending, fast, true),
        batched.paceAndStart(fastOne.read, fastOne.sending, fast, true),
      ]);
      expect(scripts).toHaveLength(1);
      // The slow connection's second delivery waits for its slot, 10 s out; the fast one's
      // burst lets its delivery go at once although the stale one asked first and took nothing.
      expect(steps[0]).toEqual({ step: 'send' });
      expect(steps[1]?.step).toBe('reserved');
      expect(steps[1] !== null && steps[1].step !== 'send' ? steps[1].waitMs : 0).toBeGreaterThan(9000);
      expect(steps[2]).toBeNull();
      expect(steps[3]).toEqual({ step: 'send' });
      expect(await stored(slowOne.read)).toEqual(slowOne.sending);
      expect(await stored(slowTwo.read)).toEqual(slowTwo.read);
      expect(await stored(fastOne.read)).toEqual(fastOne.sending);
      // What was written is what each next compare-and-set expects.
      const repo = new RedisExecutionRepo(redis, keys);
      const delivered = (d: Delivery): Delivery => ({ ...d, status: 'delivered', rev: d.rev + 1 });
      expect(await repo.updateDelivery(fastOne.sending, delivered(fastOne.sending))).toBe(true);
    });

    it('a start Redis refuses (a key of the wrong type) fails alone; the others in its script go', async () => {
      const rule = { perSecond: 100, burst: 10 };
      const [one, poisoned, three] = [await queued(), await queued(), await queued()];
      await redis.set(keys.connectionActiveDeliveries(poisoned.read.connection_id), 'not a set');
      const steps = await Promise.allSettled(
        [one, poisoned, three].map(({ read, sending }) => pacer.paceAndStart(read, sending, rule, true)),
      );
      expect(steps[0]).toEqual({ status: 'fulfilled', value: { step: 'send' } });
      expect(steps[1]!.status === 'rejected' && String(steps[1]!.reason)).toMatch(/WRONGTYPE/);
      expect(steps[2]).toEqual({ status: 'fulfilled', value: { step: 'send' } });
      expect(await stored(three.read)).toEqual(three.sending);
    });

    it('a delivery changed since it was read (a cancel won) takes no slot or token and is not written', async () => {
      const rule = { perSecond: 1, burst: 1 };
      const { read, sending } = await queued();
      const cancelled = { ...read, status: 'cancelled' as const, rev: read.rev + 1 };
      await redis.set(keys.delivery(read.id), JSON.stringify(cancelled));
      expect(await pacer.paceAndStart(read, sending, rule, true)).toBeNull();
      expect(await stored(read)).toEqual(cancelled);
      // Gone altogether: the same.
      await redis.del(keys.delivery(read.id));
      expect(await pacer.paceAndStart(read, sending, rule, true)).toBeNull();
      // Neither call took anything: the connection's first slot and first token are still free.
      expect(await pacer.paceSend(read.connection_id, rule, true)).toEqual({ step: 'send' });
    });
  });
});
