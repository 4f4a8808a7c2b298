import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/common/errors.js';
import { isRedisUnavailable } from '../../src/domain/common/unavailable.js';
import { fromInfrastructureError, STATUS_BY_CODE } from '../../src/http/middleware/problem.js';
import { ephemeralMessage, modalErrors } from '../../src/slack/errors.js';
import { watchRedis } from '../../src/store/redis.js';
import { memoryLogger } from '../faults/support.js';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });
const named = (message: string, name: string) => Object.assign(new Error(message), { name });

describe('Redis unavailable: one classification for both edges', () => {
  it.each([
    ['a command time-out', new Error('Command timed out')],
    ['a closed connection', new Error('Connection is closed.')],
    ['no offline queue', new Error("Stream isn't writeable and enableOfflineQueue options is false")],
    [
      'retries exhausted',
      named(
        'Reached the max retries per request limit (which is 1). Refer to "maxRetriesPerRequest" option for details.',
        'MaxRetriesPerRequestError',
      ),
    ],
    ['a refused connection', withCode('connect ECONNREFUSED 127.0.0.1:6379', 'ECONNREFUSED')],
    ['a reset connection', withCode('read ECONNRESET', 'ECONNRESET')],
    ['a loading Redis', new Error('LOADING Redis is loading the dataset in memory')],
    ['a demoted primary', new Error("READONLY You can't write against a read only replica.")],
    ['a cluster that is down', new Error('CLUSTERDOWN The cluster is down')],
    [
      'a primary with too few replicas (min-replicas-to-write)',
      new Error('NOREPLICAS Not enough good replicas to write.'),
    ],
  ])('%s is a 503 service_unavailable with Retry-After', (_what, err) => {
    expect(isRedisUnavailable(err)).toBe(true);
    const mapped = fromInfrastructureError(err);
    expect(mapped?.code).toBe('service_unavailable');
    expect(STATUS_BY_CODE.service_unavailable).toBe(503);
    expect(Number(mapped?.meta.retryAfter)).toBeGreaterThan(0);
    expect(ephemeralMessage(err)).toMatch(/can't reach its database/);
    expect(modalErrors(err, ['title'], 'title').title).toMatch(/can't reach its database/);
  });

  it.each([
    ['a bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
    ['a script error', new Error('ERR Error running script')],
    ['a domain error', new DomainError('not_found', 'Incident inc_1 was not found.')],
    ['not an error', 'Command timed out'],
  ])('%s is not', (_what, err) => {
    expect(isRedisUnavailable(err)).toBe(false);
    expect(fromInfrastructureError(err)).toBeNull();
  });
});

describe('watchRedis', () => {
  it('logs once per state change, not once per reconnect attempt', () => {
    const { log, lines } = memoryLogger();
    const client = new EventEmitter();
    watchRedis(client as unknown as Parameters<typeof watchRedis>[0], log, 'herald-api');
    for (let i = 0; i < 10; i++) client.emit('error', withCode('connect ECONNREFUSED 127.0.0.1:1', 'ECONNREFUSED'));
    client.emit('ready');
    client.emit('ready');
    for (let i = 0; i < 5; i++) client.emit('error', new Error('Connection is closed.'));
    const got = lines().map((l) => [l.level, l.msg, l.connection]);
    expect(got).toEqual([
      [40, 'redis unreachable; retrying (requests answer 503 meanwhile)', 'herald-api'],
      [30, 'redis reachable again', 'herald-api'],
      [40, 'redis unreachable; retrying (requests answer 503 meanwhile)', 'herald-api'],
    ]);
  });
});
