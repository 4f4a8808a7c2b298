/**
 * The service tier's SendPacer (FakeSendPacer) answers as the Redis pacer does (its Lua scripts,
 * test/integration/pacing.test.ts): the same GCRA, on the fake clock, so its answers are exact.
 */
import { describe, expect, it } from 'vitest';
import { startSending } from '../../src/domain/execution/delivery-state.js';
import { newDelivery, type Delivery } from '../../src/domain/execution/execution.js';
import { FakeClock, FakeSendPacer, InMemoryExecutionRepo, InMemoryIncidentRepo, SeqIds } from './fakes.js';

function rig() {
  const clock = new FakeClock();
  const repo = new InMemoryExecutionRepo(new InMemoryIncidentRepo());
  return { clock, repo, pacer: new FakeSendPacer(clock, repo) };
}

describe('FakeSendPacer, as the Redis pacer', () => {
  it('lets a burst through, then reserves the next slots one interval apart', async () => {
    const { pacer } = rig();
    const rule = { perSecond: 2.5, burst: 5 };
    const waits: number[] = [];
    for (let i = 0; i < 7; i++) waits.push(await pacer.reserve('con_burst', rule));
    expect(waits).toEqual([0, 0, 0, 0, 0, 400, 800]);
  });

  it('keeps connections apart, and forgets reserved slots on reset', async () => {
    const { pacer } = rig();
    const rule = { perSecond: 1 / 60, burst: 1 };
    expect(await pacer.reserve('con_a', rule)).toBe(0);
    expect(await pacer.reserve('con_a', rule)).toBe(60_000);
    expect(await pacer.reserve('con_b', rule)).toBe(0);
    await pacer.reset('con_a');
    expect(await pacer.reserve('con_a', rule)).toBe(0);
  });

  it('the send bucket grants a token only when one is free now, and takes nothing otherwise', async () => {
    const { pacer, clock } = rig();
    const rule = { perSecond: 1, burst: 1 };
    expect(await pacer.take('con_send', rule)).toBe(0);
    expect(await pacer.take('con_send', rule)).toBe(1000);
    expect(await pacer.take('con_send', rule)).toBe(1000);
    clock.advance(1000);
    expect(await pacer.take('con_send', rule)).toBe(0);
  });

  it('paceSend is reserve then take in one step', async () => {
    const { pacer } = rig();
    const rule = { perSecond: 1, burst: 1 };
    expect(await pacer.paceSend('con_both', rule, true)).toEqual({ step: 'send' });
    expect(await pacer.paceSend('con_both', rule, true)).toEqual({ step: 'reserved', waitMs: 1000 });
    expect(await pacer.paceSend('con_both', rule, false)).toEqual({ step: 'take', waitMs: 1000 });
    expect(await pacer.reserve('con_both', rule)).toBe(2000);
  });

  it('paceAndStart writes the `sending` record only on `send`, and takes nothing for a record changed since it was read', async () => {
    const { pacer, repo, clock } = rig();
    const ids = new SeqIds();
    const queued = (): { read: Delivery; sending: Delivery } => {
      const d = newDelivery({
        id: ids.next('delivery'),
        executionId: ids.next('execution'),
        incidentId: ids.next('incident'),
        connectionId: 'con_start',
        connectionType: 'webhook',
        templateId: null,
        templateVersion: null,
        content: { subject: 'S', body: 'B' },
      });
      repo.deliveries.set(d.id, structuredClone(d));
      return { read: d, sending: startSending(d, clock.now()) as Delivery };
    };
    const rule = { perSecond: 0.1, burst: 1 };
    const first = queued();
    expect(await pacer.paceAndStart(first.read, first.sending, rule, true)).toEqual({ step: 'send' });
    expect(repo.deliveries.get(first.read.id)).toEqual(first.sending);

    const second = queued();
    expect(await pacer.paceAndStart(second.read, second.sending, rule, true)).toEqual({
      step: 'reserved',
      waitMs: 10_000,
    });
    expect(repo.deliveries.get(second.read.id)).toEqual(second.read);

    const third = queued();
    repo.deliveries.set(third.read.id, { ...third.read, status: 'cancelled', rev: third.read.rev + 1 });
    const before = [...pacer.tats];
    expect(await pacer.paceAndStart(third.read, third.sending, rule, true)).toBeNull();
    expect([...pacer.tats]).toEqual(before);
    expect(repo.deliveries.get(third.read.id)?.status).toBe('cancelled');
  });
});
