import { UpdateModeSchema } from '../../domain/execution/conversation.js';
import { z } from 'zod';
import { ChannelTypeSchema, channelOf, type ChannelType } from '../../channels/index.js';
import {
  ConnectionHealthSchema,
  ConnectionTestResultSchema,
  type ConnectionRecord,
} from '../../domain/connection/connection.js';

export const SecretStateSchema = z
  .object({
    set: z.literal(true),
    last4: z.string().nullable().meta({ description: 'Last 4 characters; null for values shorter than 12.' }),
  })
  .meta({ id: 'SecretState' });

export const ConnectionSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    type: ChannelTypeSchema,
    enabled: z.boolean(),
    config: z
      .record(z.string(), z.unknown())
      .meta({ description: 'The non-secret part of the config; an optional field that is not set is null.' }),
    secrets: z
      .record(z.string(), SecretStateSchema)
      .meta({ description: 'One entry per secret that is set; values are never returned.' }),
    rate_limit_per_minute: z.number().int().nullable(),
    update_mode: UpdateModeSchema,
    health: ConnectionHealthSchema,
    last_test: ConnectionTestResultSchema.nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Connection' });
export type ConnectionWire = z.infer<typeof ConnectionSchema>;

export const ConnectionCreatedSchema = ConnectionSchema.extend({
  signing_secret: z.string().optional().meta({ description: 'webhook only: the signing secret, shown this once.' }),
}).meta({ id: 'ConnectionCreated' });

/**
 * The non-secret config fields of a type, in its schema's order: what `config` on the wire
 * lists, with null for an optional field that is not set (docs/api.md: absent is null, not omitted).
 */
function presentedConfigFields(type: ChannelType): string[] {
  const def = channelOf(type);
  const schema = def.configSchema;
  const fields = schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
  return fields.filter((f) => !def.secretFields.includes(f) && !def.secretMaps.includes(f));
}

/** What goes on the wire: no sealed value, no revision; secrets as `{set, last4}`. */
export function presentConnection(c: ConnectionRecord): ConnectionWire {
  const config: Record<string, unknown> = Object.fromEntries(presentedConfigFields(c.type).map((f) => [f, null]));
  for (const [k, v] of Object.entries(c.config)) config[k] = v;
  return {
    id: c.id,
    name: c.name,
    type: c.type,
    enabled: c.enabled,
    config,
    secrets: Object.fromEntries(Object.entries(c.secrets).map(([k, s]) => [k, { set: true as const, last4: s.last4 }])),
    rate_limit_per_minute: c.rate_limit_per_minute,
    update_mode: c.update_mode ?? 'thread',
    health: c.health,
    last_test: c.last_test,
    created_at: c.created_at,
    updated_at: c.updated_at,
  };
}
