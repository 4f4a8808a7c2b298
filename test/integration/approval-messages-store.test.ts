import { describe, expect, it } from 'vitest';
import { RedisApprovalMessageLog } from '../../src/store/approval-messages.js';
import { useTestRedis } from '../support/redis.js';

const t = useTestRedis('apm');
const log = () => new RedisApprovalMessageLog(t.redis, t.keys);

describe('RedisApprovalMessageLog', () => {
  it('keeps the first DM recorded per approver, per audience', async () => {
    const l = log();
    expect(await l.recordDm('exe_1', 'customers', 'UBOB', { channel: 'D1', ts: '1.1' })).toBe(true);
    expect(await l.recordDm('exe_1', 'customers', 'UBOB', { channel: 'D1', ts: '2.2' })).toBe(false);
    expect(await l.recordDm('exe_1', 'customers', 'UCAROL', { channel: 'D2', ts: '3.3' })).toBe(true);
    expect(await l.recordDm('exe_1', 'executives', 'UBOB', { channel: 'D1', ts: '4.4' })).toBe(true);
    expect([...(await l.dms('exe_1', 'customers'))]).toEqual([
      ['UBOB', { channel: 'D1', ts: '1.1' }],
      ['UCAROL', { channel: 'D2', ts: '3.3' }],
    ]);
    expect((await l.dms('exe_2', 'customers')).size).toBe(0);
    expect(await t.redis.ttl(t.keys.approvalMessages('exe_1'))).toBeGreaterThan(0);
  });

  it('remembers which thread lines were posted, per state', async () => {
    const l = log();
    expect(await l.threadLinePosted('exe_3', 'customers', 'pending')).toBe(false);
    await l.recordThreadLine('exe_3', 'customers', 'pending');
    expect(await l.threadLinePosted('exe_3', 'customers', 'pending')).toBe(true);
    expect(await l.threadLinePosted('exe_3', 'customers', 'approved')).toBe(false);
    expect(await l.threadLinePosted('exe_3', 'executives', 'pending')).toBe(false);
  });

  it('runs one notifier at a time per (execution, audience), and frees the lock after a failure', async () => {
    const a = log();
    const b = log();
    const order: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const first = a.exclusively('exe_4', 'customers', async () => {
      order.push('a start');
      await held;
      order.push('a end');
    });
    // Wait until a holds the lock before b asks for it.
    while (order.length === 0) await new Promise((r) => setTimeout(r, 5));
    const second = b.exclusively('exe_4', 'customers', async () => void order.push('b'));
    // Another audience is not held up.
    await b.exclusively('exe_4', 'executives', async () => void order.push('other'));
    release();
    await Promise.all([first, second]);
    expect(order).toEqual(['a start', 'other', 'a end', 'b']);
    await expect(a.exclusively('exe_5', 'customers', () => Promise.reject(new Error('Slack said no')))).rejects.toThrow(
      'Slack said no',
    );
    expect(await b.exclusively('exe_5', 'customers', async () => 'free')).toBe('free');
  });
});
