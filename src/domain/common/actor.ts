import { z } from 'zod';

/** Who did something: recorded on incidents (created_by) and on every timeline event. */
export const ActorSchema = z
  .object({
    type: z.enum(['api_key', 'slack_user', 'system']),
    id: z.string(),
    name: z.string(),
  })
  .meta({ id: 'Actor' });

export type Actor = z.infer<typeof ActorSchema>;

export const SYSTEM_ACTOR: Actor = { type: 'system', id: 'herald', name: 'Herald' };
