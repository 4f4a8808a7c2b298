import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { channelOf, type ChannelType } from '../../src/channels/index.js';
import { openCore, StartupError } from '../../src/composition/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { createSecretBox } from '../../src/store/crypto.js';
import { childEnv, runEntry } from '../support/child.js';
import { CONNECTION_BODIES } from '../support/connection-bodies.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { connectTestRedis, dropPrefix, testRedisUrl, uniquePrefix } from '../support/redis.js';

const newKey = () => randomBytes(32).toString('base64');

describe('the secret box', () => {
  const a = randomBytes(32);
  const b = randomBytes(32);

  it('opens what a previous key sealed, and reseals it under the current key', () => {
    const sealedByA = createSecretBox(a).seal('hunter2');
    const rotated = createSecretBox(b, [a]);
    expect(rotated.open(sealedByA)).toBe('hunter2');
    const resealed = rotated.reseal(sealedByA);
    expect(resealed).not.toBeNull();
    // Under the new key alone, the resealed value opens and the old one does not.
    expect(createSecretBox(b).open(resealed!)).toBe('hunter2');
    expect(() => createSecretBox(b).open(sealedByA)).toThrow(/could not be opened/);
    expect(rotated.reseal(resealed!)).toBeNull();
  });

  it('refuses a value no key opens, and keys that are not 32 bytes', () => {
    const sealed = createSecretBox(randomBytes(32)).seal('x');
    expect(() => createSecretBox(b, [a]).reseal(sealed)).toThrow();
    expect(() => createSecretBox(b, [randomBytes(16)])).toThrow(/32 bytes/);
  });
});

describe('rotating HERALD_SECRET_KEY', () => {
  const prefix = uniquePrefix('rot');
  const dataDir = mkdtempSync(join(tmpdir(), 'herald-rot-'));
  const [keyA, keyB, keyC] = [newKey(), newKey(), newKey()];
  const redis = connectTestRedis();
  const running: TestHerald[] = [];

  afterAll(async () => {
    await Promise.all(running.map((h) => h.close({ keepData: true }).catch(() => undefined)));
    await dropPrefix(redis, prefix);
    redis.disconnect();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const start = async (env: Record<string, string>) => {
    const h = await startHerald({ HERALD_KEY_PREFIX: prefix, ...env });
    running.push(h);
    return h;
  };
  const stop = async (h: TestHerald) => {
    running.splice(running.indexOf(h), 1);
    await h.close({ keepData: true });
  };
  const reseal = async (env: Record<string, string>) => {
    const config = loadConfig({
      REDIS_URL: testRedisUrl(),
      HERALD_KEY_PREFIX: prefix,
      HERALD_DATA_DIR: dataDir,
      LOG_LEVEL: 'silent',
      ...env,
    });
    const core = await openCore({ config, log: createLogger('silent') });
    try {
      return await core.resealSecrets();
    } finally {
      await core.close();
    }
  };

  /** Every connection's secrets, opened as a delivery would open them. */
  const openedSecrets = async (h: TestHerald, ids: string[]) =>
    Promise.all(
      ids.map(async (id) => JSON.stringify((await h.herald.services.connections.getForDelivery(id))?.config)),
    );

  it('reads the old key’s secrets through HERALD_SECRET_KEY_PREVIOUS, reseals them, then needs only the new key', async () => {
    // 1. Everything sealed with key A: a connection of every type and a replayable create.
    const first = await start({ HERALD_SECRET_KEY: keyA });
    const ids: string[] = [];
    for (const body of Object.values(CONNECTION_BODIES)) {
      const res = await first.api('POST', '/v1/connections', { body });
      expect(res.status).toBe(201);
      ids.push(res.body.id as string);
    }
    const webhookBody = { name: 'Signed', type: 'webhook', config: { url: 'https://hooks.example.com/signed' } };
    const created = await first.api('POST', '/v1/connections', {
      body: webhookBody,
      headers: { 'Idempotency-Key': 'rotate-me' },
    });
    expect(created.status).toBe(201);
    const signingSecret = created.body.signing_secret as string;
    expect(signingSecret).toMatch(/^whsec_/);
    ids.push(created.body.id as string);
    // A subscriber: its address is sealed too (and the subscriber key, made at start-up).
    const imported = await first.api('POST', '/v1/subscribers/import', {
      body: { source: 'rotation', subscribers: [{ email: 'reader@example.com', confirmed: true }] },
    });
    expect(imported.status).toBe(200);
    const listed = await first.api('GET', '/v1/subscribers?email=reader%40example.com');
    const subscriberId = (listed.body.data as { id: string }[])[0]!.id;
    const before = await openedSecrets(first, ids);
    const adminToken = first.token;
    await stop(first);

    // 2. New key B with A as the previous one: everything still reads, and the start-up says a
    //    rotation is under way.
    const second = await start({ HERALD_SECRET_KEY: keyB, HERALD_SECRET_KEY_PREVIOUS: keyA });
    expect(await openedSecrets(second, ids)).toEqual(before);
    const replay = await second.api('POST', '/v1/connections', {
      body: webhookBody,
      headers: { 'Idempotency-Key': 'rotate-me' },
      token: adminToken,
    });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body.signing_secret).toBe(signingSecret);

    // 3. Reseal, while that Herald runs: the check value, every connection and the stored answer.
    const report = await reseal({ HERALD_SECRET_KEY: keyB, HERALD_SECRET_KEY_PREVIOUS: keyA });
    expect(report.unreadable).toEqual([]);
    // The status page holds no secret: there is nothing of it to reseal.
    const sealed = Object.values(CONNECTION_BODIES).filter((b) => hasSecrets(b.type as ChannelType)).length + 1;
    // The check value, the connections, the stored answer, the subscriber key and the subscriber.
    expect(report.resealed).toBe(1 + sealed + 1 + 2);
    expect(report.checked).toBeGreaterThanOrEqual(report.resealed);
    // A second run, through the CLI as an operator runs it, finds nothing left to do.
    const cli = await runEntry(
      'cli',
      ['secrets', 'reseal', '--json'],
      childEnv({
        REDIS_URL: testRedisUrl(),
        HERALD_KEY_PREFIX: prefix,
        HERALD_DATA_DIR: dataDir,
        HERALD_SECRET_KEY: keyB,
        HERALD_SECRET_KEY_PREVIOUS: keyA,
      }),
    );
    // Nothing on stderr but the line naming the Redis used.
    expect(cli.stderr).toMatch(/^herald: using Redis rediss?:\/\/\S+ \(REDIS_URL\)\n$/);
    expect(cli.code).toBe(0);
    expect(JSON.parse(cli.stdout)).toEqual({ checked: report.checked, resealed: 0, unreadable: [] });
    await stop(second);

    // 4. Key B alone reads everything, the replay included.
    const third = await start({ HERALD_SECRET_KEY: keyB });
    expect(await openedSecrets(third, ids)).toEqual(before);
    const again = await third.api('POST', '/v1/connections', {
      body: webhookBody,
      headers: { 'Idempotency-Key': 'rotate-me' },
      token: adminToken,
    });
    expect(again.body.signing_secret).toBe(signingSecret);
    const subscriber = await third.api('GET', `/v1/subscribers/${subscriberId}`, { token: adminToken });
    expect(subscriber.body).toMatchObject({ id: subscriberId, address: 'reader@example.com' });
    await stop(third);

    // 5. A key that sealed nothing here is refused at start-up, and reseal refuses it too.
    const wrong = startHerald({ HERALD_KEY_PREFIX: prefix, HERALD_SECRET_KEY: keyC });
    await expect(wrong).rejects.toBeInstanceOf(StartupError);
    await expect(wrong).rejects.toThrow(/HERALD_SECRET_KEY does not match/);
    await expect(reseal({ HERALD_SECRET_KEY: keyC, HERALD_SECRET_KEY_PREVIOUS: keyA })).rejects.toThrow(
      /does not match/,
    );
  });
});

/** Whether a connection of this type stores any secret (sealed at rest). */
function hasSecrets(type: ChannelType): boolean {
  const m = channelOf(type);
  return m.secretFields.length > 0 || m.secretMaps.length > 0;
}
