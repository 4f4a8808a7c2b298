import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { connectRedis, describeRedisTarget, redisTargetFromConfig } from '../../src/store/redis-connect.js';
import { Cluster, Redis } from 'ioredis';

const problems = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  return [];
};

describe('Redis settings', () => {
  it('parses cluster nodes and sentinels as host:port lists', () => {
    const c = loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-b:7001', REDIS_PASSWORD: 'pw' });
    expect(c.REDIS_CLUSTER_NODES).toEqual([
      { host: '10.0.0.1', port: 7000 },
      { host: 'redis-b', port: 7001 },
    ]);
    expect(redisTargetFromConfig(c)).toEqual({ kind: 'cluster', nodes: c.REDIS_CLUSTER_NODES, password: 'pw' });
    const s = loadConfig({ REDIS_SENTINELS: 's1:26379,s2:26379', REDIS_SENTINEL_NAME: 'herald' });
    expect(redisTargetFromConfig(s)).toEqual({
      kind: 'sentinel',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26379 },
      ],
      name: 'herald',
    });
    expect(describeRedisTarget(redisTargetFromConfig(s))).toBe('sentinel "herald" (s1:26379,s2:26379)');
  });

  it('refuses two ways to reach Redis at once, naming both', () => {
    const p = problems({ REDIS_URL: 'redis://127.0.0.1:6379', REDIS_CLUSTER_NODES: 'a:7000' });
    expect(p.join('\n')).toMatch(/REDIS_URL and REDIS_CLUSTER_NODES/);
    expect(
      problems({ REDIS_CLUSTER_NODES: 'a:7000', REDIS_SENTINELS: 's:26379', REDIS_SENTINEL_NAME: 'h' }).join('\n'),
    ).toMatch(/REDIS_CLUSTER_NODES and REDIS_SENTINELS/);
  });

  it('needs a sentinel name with sentinels, and refuses a node without a port', () => {
    expect(problems({ REDIS_SENTINELS: 's:26379' }).join('\n')).toMatch(/REDIS_SENTINEL_NAME/);
    expect(problems({ REDIS_CLUSTER_NODES: 'a' })).not.toEqual([]);
  });

  it('falls back to the embedded socket only when nothing is configured; never logs the password', () => {
    expect(redisTargetFromConfig(loadConfig({}), '/tmp/x.sock')).toEqual({ kind: 'standalone', url: '/tmp/x.sock' });
    const t = redisTargetFromConfig(loadConfig({ REDIS_URL: 'redis://u:secret@h:6380/2' }), '/tmp/x.sock');
    expect(t).toEqual({ kind: 'standalone', url: 'redis://u:secret@h:6380/2' });
    expect(describeRedisTarget(t)).not.toContain('secret');
  });

  it('builds a Cluster that reads from masters, and bounded or unbounded connections per use', () => {
    const cl = connectRedis(
      { kind: 'cluster', nodes: [{ host: '127.0.0.1', port: 1 }], password: 'pw' },
      { use: 'worker', name: 'w', options: { lazyConnect: true } },
    );
    try {
      expect(cl).toBeInstanceOf(Cluster);
      const o = (cl as Cluster).options;
      expect(o.scaleReads).toBe('master');
      expect(o.redisOptions?.maxRetriesPerRequest).toBeNull();
      expect(o.redisOptions?.password).toBe('pw');
    } finally {
      cl.disconnect();
    }
    const se = connectRedis(
      { kind: 'sentinel', sentinels: [{ host: '127.0.0.1', port: 1 }], name: 'herald' },
      { use: 'request', name: 'r', options: { lazyConnect: true } },
    );
    try {
      expect(se).toBeInstanceOf(Redis);
      const o = (se as Redis).options;
      expect(o.name).toBe('herald');
      expect(o.role).toBe('master');
      expect(o.maxRetriesPerRequest).toBe(3);
    } finally {
      se.disconnect();
    }
  });
});
