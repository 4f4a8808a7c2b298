import type { Cluster, Redis } from 'ioredis';

/**
 * The client every store module talks to: one Redis, or a Cluster. A leaf of its own so the
 * helpers that redis-connect.ts wires onto a new client (pipeline-release.ts, deadline.ts) can
 * name it without importing redis-connect.ts back.
 */
export type RedisClient = Redis | Cluster;
