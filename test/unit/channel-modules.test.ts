import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CHANNEL_TYPES, CHANNELS, channelOf, type ChannelType } from '../../src/channels/index.js';
import { ROOT } from '../support/child.js';
import { CONNECTION_BODIES } from '../support/connection-bodies.js';

/**
 * A channel type is one folder under src/channels/ plus one line in its registry (CONTRIBUTING.md "Adding
 * a channel type"). These tests fail when a folder is not registered, or a registered type lacks
 * a piece: its files, its config, its format, its pacing, its sender or a read-only check its
 * config promises.
 */
const CHANNELS_DIR = join(ROOT, 'src', 'channels');
const folderOf = (type: ChannelType) => type.replace(/_/g, '-');

/** A valid config of every type (both Slack modes). */
const samples = Object.values(CONNECTION_BODIES).map((b) => ({ type: b.type as ChannelType, config: b.config }));

describe('channel modules', () => {
  it('every folder under src/channels/ (but common/) is a registered type, and every type has its folder', () => {
    const folders = readdirSync(CHANNELS_DIR, { withFileTypes: true })
      .filter((e) => e.isDirectory() && e.name !== 'common')
      .map((e) => e.name)
      .sort();
    expect(folders).toEqual(CHANNEL_TYPES.map(folderOf).sort());
  });

  it.each(CHANNEL_TYPES.map((t) => [t]))(
    '%s has its config, sender and module files, and CONTRIBUTING.md lists it',
    (type) => {
      for (const file of ['config.ts', 'send.ts', 'index.ts'])
        expect(existsSync(join(CHANNELS_DIR, folderOf(type), file)), `${folderOf(type)}/${file}`).toBe(true);
      const contributing = readFileSync(join(ROOT, 'CONTRIBUTING.md'), 'utf8');
      expect(contributing).toContain(`| \`${type}\` | \`${folderOf(type)}/\` |`);
    },
  );

  it.each(CHANNEL_TYPES.map((t) => [t]))('%s declares every piece', async (type) => {
    const m = channelOf(type);
    expect(CHANNELS[type].type).toBe(type);
    expect(m.label.trim()).not.toBe('');
    expect(typeof m.configSchema.safeParse).toBe('function');
    expect(typeof m.createConfigSchema.safeParse).toBe('function');
    expect(Array.isArray(m.secretFields) && Array.isArray(m.secretMaps)).toBe(true);
    expect(m.pacing.perSecond).toBeGreaterThan(0);
    expect(m.pacing.burst).toBeGreaterThanOrEqual(1);
    const preview = m.format(null);
    expect(typeof preview.escape('a value')).toBe('string');
    expect(typeof preview.html).toBe('boolean');

    const adapter = await m.adapter();
    expect(typeof adapter.createSender).toBe('function');

    const configs = samples.filter((s) => s.type === type);
    expect(configs.length, 'test/support/connection-bodies.ts has a sample').toBeGreaterThan(0);
    for (const { config } of configs) {
      // What a create stores: the create schema, then the generated values (a webhook's secret).
      const created = m.createConfigSchema.parse(config);
      const parsed = m.configSchema.parse(m.complete ? m.complete(created, randomBytes) : created);
      // The config's secret fields are fields of its schema.
      const fields = m.configSchema instanceof z.ZodObject ? Object.keys(m.configSchema.shape) : [];
      for (const f of [...m.secretFields, ...m.secretMaps]) expect(fields).toContain(f);
      expect(Array.isArray(m.destinations(parsed))).toBe(true);
      expect(typeof m.format(parsed).escape('x')).toBe('string');
      // A read-only check the config names must exist in the sender module.
      if (m.readOnlyCheck(parsed) !== null)
        expect(adapter.check, `${type} names ${m.readOnlyCheck(parsed)} but send.ts has no check`).not.toBeNull();
    }
    if (adapter.check === null)
      for (const { config } of configs) expect(m.readOnlyCheck(m.createConfigSchema.parse(config))).toBeNull();
  });

  it("the registry holds the contract's channel types, one module each, in the contract's order", () => {
    expect(Object.keys(CHANNELS)).toEqual([...CHANNEL_TYPES]);
  });

  it('only Teams declares that its "delivered" means accepted (a test message is then accepted_unverified)', () => {
    expect(CHANNEL_TYPES.filter((t) => channelOf(t).acceptsOnly === true)).toEqual(['teams']);
  });
});
