import { describe, expect, it } from 'vitest';
import { parseOutboundAllow } from '../../src/domain/connection/address-policy.js';
import { EventEndpointService } from '../../src/services/events.js';
import { createSecretBox, nodeTokenCrypto } from '../../src/store/crypto.js';
import { RedisEventStore } from '../../src/store/event-store.js';
import { resealAll } from '../../src/store/reseal.js';
import { useTestRedis } from '../support/redis.js';

/** `herald secrets reseal` moves event endpoints' signing secrets to the current key too. */
const t = useTestRedis('evreseal');

describe('resealing event endpoint secrets', () => {
  it('reseals the current and the rotated-out secret, so the new key alone opens them', async () => {
    const oldKey = Buffer.alloc(32, 1);
    const newKey = Buffer.alloc(32, 2);
    const store = new RedisEventStore(t.redis, t.keys);
    const service = new EventEndpointService({
      store,
      box: createSecretBox(oldKey),
      crypto: nodeTokenCrypto,
      clock: { now: () => new Date() },
      allow: parseOutboundAllow([]),
      http: { request: () => Promise.reject(new Error('not sent')) },
      random: Math.random,
      retentionMs: 86_400_000,
      notifier: { endpointDisabled: () => undefined },
    });
    const { endpoint, signingSecret: first } = await service.create({ url: 'https://hooks.example.com/h' });
    const { signingSecret: second } = await service.rotateSecret(endpoint.id, {});
    const report = await resealAll(t.redis, t.keys, createSecretBox(newKey, [oldKey]));
    expect(report.unreadable).toEqual([]);
    expect(report.resealed).toBeGreaterThanOrEqual(1);
    const onlyNew = createSecretBox(newKey);
    const stored = (await store.getEndpoint(endpoint.id))!;
    expect(stored.secrets.map((s) => onlyNew.open(s.sealed))).toEqual([second, first]);
  });
});
