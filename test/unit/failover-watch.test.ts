/**
 * The sentinel events Herald reads to learn that a failover of its primary has begun, and the
 * state they drive (src/store/failover-watch.ts): from the first event until the switch or an
 * abort, durable writes are refused.
 */
import { describe, expect, it } from 'vitest';
import {
  FAILOVER_RECHECK_AFTER_MS,
  FailoverState,
  parseSentinelEvent,
  readSentinelMaster,
  REDIRECT_MS,
} from '../../src/store/failover-watch.js';

describe('parseSentinelEvent', () => {
  it('reads the master of the events a failover publishes, in the formats sentinel.c uses', () => {
    // Master events: "master <name> <ip> <port>"; replica events: "... @ <master> <ip> <port>".
    expect(parseSentinelEvent('+try-failover', 'master herald 127.0.0.1 6379')).toEqual({
      kind: 'begun',
      master: 'herald',
      at: { host: '127.0.0.1', port: 6379 },
    });
    for (const channel of [
      '+elected-leader',
      '+failover-state-select-slave',
      '+failover-state-send-slaveof-noone',
      '+failover-state-wait-promotion',
      '+failover-state-reconf-slaves',
      '+failover-end',
      '+failover-end-for-timeout',
    ]) {
      expect(parseSentinelEvent(channel, 'master herald 127.0.0.1 6379'), channel).toMatchObject({
        kind: 'begun',
        master: 'herald',
      });
    }
    expect(
      parseSentinelEvent('+selected-slave', 'slave 127.0.0.1:6380 127.0.0.1 6380 @ herald 127.0.0.1 6379'),
    ).toEqual({ kind: 'begun', master: 'herald', at: { host: '127.0.0.1', port: 6379 } });
    expect(
      parseSentinelEvent('+promoted-slave', 'slave 127.0.0.1:6380 127.0.0.1 6380 @ herald 127.0.0.1 6379'),
    ).toMatchObject({ kind: 'begun', master: 'herald' });
    // An epoch after the address (older sentinels) changes nothing.
    expect(parseSentinelEvent('-failover-abort-not-elected', 'master herald 127.0.0.1 6379 7')).toEqual({
      kind: 'aborted',
      master: 'herald',
      at: { host: '127.0.0.1', port: 6379 },
    });
    expect(parseSentinelEvent('-failover-abort-slave-timeout', 'master other 10.0.0.1 6379')).toMatchObject({
      kind: 'aborted',
      master: 'other',
    });
    expect(parseSentinelEvent('+switch-master', 'herald 127.0.0.1 6379 127.0.0.1 6380')).toEqual({
      kind: 'switched',
      master: 'herald',
      from: { host: '127.0.0.1', port: 6379 },
      to: { host: '127.0.0.1', port: 6380 },
    });
  });

  it('ignores what does not concern a failover, and malformed messages', () => {
    expect(parseSentinelEvent('+sdown', 'master herald 127.0.0.1 6379')).toBeNull();
    expect(parseSentinelEvent('+odown', 'master herald 127.0.0.1 6379 #quorum 2/2')).toBeNull();
    expect(parseSentinelEvent('+new-epoch', '7')).toBeNull();
    expect(parseSentinelEvent('+sentinel', 'sentinel abc 127.0.0.1 26379 @ herald 127.0.0.1 6379')).toBeNull();
    expect(parseSentinelEvent('+switch-master', 'herald 127.0.0.1 6379')).toBeNull();
    expect(parseSentinelEvent('+try-failover', '')).toBeNull();
  });
});

describe('FailoverState', () => {
  const begun = { kind: 'begun', master: 'herald' } as const;
  const aborted = { kind: 'aborted', master: 'herald' } as const;
  const a = { host: '127.0.0.1', port: 6379 };
  const b = { host: '127.0.0.1', port: 6380 };
  const c = { host: '127.0.0.1', port: 6381 };

  it('is under way from the first event until the switch, which names the new primary', () => {
    const s = new FailoverState('herald');
    expect(s.underWay(0)).toBe(false);
    const g = s.generation;
    s.signal('s1', begun, 0);
    expect(s.underWay(1)).toBe(true);
    expect(s.generation).toBe(g + 1);
    // Later events of the same failover are the same failover.
    s.signal('s1', begun, 100);
    expect(s.generation).toBe(g + 1);
    s.signal('s1', { kind: 'switched', master: 'herald', from: a, to: b }, 900);
    expect(s.underWay(901)).toBe(false);
    expect(s.master).toEqual(b);
    expect(s.generation).toBe(g + 2);
  });

  it("ignores other masters' events", () => {
    const s = new FailoverState('herald');
    s.signal('s1', { kind: 'begun', master: 'other' }, 0);
    s.signal('s1', { kind: 'switched', master: 'other', from: a, to: b }, 0);
    expect(s.underWay(1)).toBe(false);
    expect(s.master).toBeUndefined();
    expect(s.generation).toBe(0);
  });

  it("ends on an abort only by the sentinel that began it: another's may have been elected", () => {
    const s = new FailoverState('herald');
    s.signal('s1', begun, 0);
    s.signal('s2', begun, 0);
    s.signal('s1', aborted, 100);
    expect(s.underWay(101)).toBe(true);
    s.signal('s2', aborted, 200);
    expect(s.underWay(201)).toBe(false);
  });

  it('takes a switch away from a primary other than the last one named as old news', () => {
    const s = new FailoverState('herald');
    s.signal('s1', { kind: 'switched', master: 'herald', from: a, to: b }, 0);
    s.signal('s1', { kind: 'switched', master: 'herald', from: b, to: c }, 10);
    const g = s.generation;
    // A sentinel that learnt late announces the first switch after the second.
    s.signal('s3', { kind: 'switched', master: 'herald', from: a, to: b }, 20);
    expect(s.master).toEqual(c);
    expect(s.generation).toBe(g);
  });

  it('sends a connection that a late sentinel points at the replaced primary to the new one', () => {
    const s = new FailoverState('herald');
    expect(s.redirect('127.0.0.1:6379', 0)).toBeNull();
    s.signal('s1', { kind: 'switched', master: 'herald', from: a, to: b }, 1000);
    expect(s.redirect('127.0.0.1:6379', 1000)).toEqual(b);
    expect(s.redirect('127.0.0.1:6380', 1000)).toBeNull();
    expect(s.redirect('10.0.0.9:6379', 1000)).toBeNull();
    // Every sentinel has long learnt of the switch by then.
    expect(s.redirect('127.0.0.1:6379', 1000 + REDIRECT_MS + 1)).toBeNull();
    // Switching back to a replaced primary stops sending connections away from it.
    s.signal('s1', { kind: 'switched', master: 'herald', from: b, to: a }, 2000);
    expect(s.redirect('127.0.0.1:6379', 2000)).toBeNull();
    expect(s.redirect('127.0.0.1:6380', 2000)).toEqual(a);
    s.forgetRedirects();
    expect(s.redirect('127.0.0.1:6380', 2000)).toBeNull();
  });

  it("takes the leader's events after the switch, reconfiguring the replaced primary's replicas, as the tail of that failover", () => {
    // As recorded from Redis 7: the other sentinels announce the switch as soon as the replica is
    // promoted; the leader then reconfigures the other replica before announcing it itself.
    const s = new FailoverState('herald');
    const atA = { host: '127.0.0.1', port: 6379 };
    s.signal('leader', { kind: 'begun', master: 'herald', at: atA }, 0);
    s.signal('s2', { kind: 'switched', master: 'herald', from: a, to: b }, 1000);
    expect(s.underWay(1000)).toBe(false);
    const g = s.generation;
    s.signal(
      'leader',
      parseSentinelEvent('+slave-reconf-inprog', 'slave 127.0.0.1:6381 127.0.0.1 6381 @ herald 127.0.0.1 6379'),
      2000,
    );
    s.signal('leader', parseSentinelEvent('+failover-end', 'master herald 127.0.0.1 6379'), 3000);
    expect(s.underWay(3000)).toBe(false);
    expect(s.generation).toBe(g);
    // Asked meanwhile, the leader still has its failover in progress: of the replaced primary.
    s.answer('leader', { failoverInProgress: true, at: atA }, 3000);
    expect(s.underWay(3000)).toBe(false);
    // A failover of the new primary is a new one.
    s.signal('s2', parseSentinelEvent('+try-failover', 'master herald 127.0.0.1 6380'), 4000);
    expect(s.underWay(4000)).toBe(true);
  });

  it('asks the sentinel again after a while without news, and believes its answer', () => {
    const s = new FailoverState('herald');
    s.signal('s1', begun, 0);
    expect(s.due(FAILOVER_RECHECK_AFTER_MS - 1)).toEqual([]);
    expect(s.due(FAILOVER_RECHECK_AFTER_MS)).toEqual(['s1']);
    s.answer('s1', { failoverInProgress: true }, FAILOVER_RECHECK_AFTER_MS);
    expect(s.underWay(FAILOVER_RECHECK_AFTER_MS + 1)).toBe(true);
    expect(s.due(FAILOVER_RECHECK_AFTER_MS + 1)).toEqual([]);
    s.answer('s1', { failoverInProgress: false }, 2 * FAILOVER_RECHECK_AFTER_MS);
    expect(s.underWay(2 * FAILOVER_RECHECK_AFTER_MS)).toBe(false);
  });

  it('keeps refusing while the sentinel cannot be asked, until its failover-timeout has passed', () => {
    const s = new FailoverState('herald');
    s.answer('s1', { failoverInProgress: false, failoverTimeoutMs: 6000 }, 0);
    s.signal('s1', begun, 1000);
    s.answer('s1', undefined, 3000);
    expect(s.underWay(3000)).toBe(true);
    expect(s.due(3000)).toEqual([]);
    expect(s.underWay(7000)).toBe(true);
    expect(s.underWay(7001)).toBe(false);
  });

  it('learns of a failover it missed the events of from an answer', () => {
    const s = new FailoverState('herald');
    const g = s.generation;
    s.answer('s2', { failoverInProgress: true }, 0);
    expect(s.underWay(1)).toBe(true);
    expect(s.generation).toBe(g + 1);
  });
});

describe('readSentinelMaster', () => {
  it("reads SENTINEL MASTER's flags and failover-timeout, flat or as a map", () => {
    const flat = ['name', 'herald', 'ip', '127.0.0.1', 'port', '6379', 'flags', 'master,failover_in_progress'];
    expect(readSentinelMaster([...flat, 'failover-timeout', '6000'])).toEqual({
      failoverInProgress: true,
      at: { host: '127.0.0.1', port: 6379 },
      failoverTimeoutMs: 6000,
    });
    expect(readSentinelMaster(new Map([['flags', 's_down,o_down,master']]))).toEqual({ failoverInProgress: false });
    expect(readSentinelMaster(['name', 'herald'])).toBeNull();
    expect(readSentinelMaster('ERR unknown command')).toBeNull();
  });
});
