import type { z } from 'zod';
import type { ChannelModule, ConversationSupport, MessageFormat } from '../contracts/channel.js';

/**
 * Everything Herald knows about one platform, in one folder under src/channels/<type>/:
 *
 * - `config.ts`  the connection config schema, its secret fields and destinations (pure);
 * - `escape.ts`  how a value is escaped for the platform's markup, when it has its own (pure);
 * - `send.ts`    the sender, the platform's limits and answers, and its read-only check (I/O);
 * - `index.ts`   this module: the pieces above, the pacing default and the message format.
 *
 * The interfaces a module fills in (ChannelModule, ChannelAdapter, ChannelSender) are the
 * contract in src/contracts/channel.ts. The I/O half is loaded lazily through `adapter()`, so
 * code that only validates or renders (the domain, the CLI) never loads an HTTP or SMTP client.
 * Adding a type is a folder like the others plus one line in ./index.ts (and its name in the
 * contract's CHANNEL_TYPES); test/unit/channel-modules.test.ts fails when a piece is missing.
 */

export const NO_CONVERSATION: ConversationSupport = { thread: false, edit: false, delete: false };

/** Identity helper that keeps each module's literal type and config type. */
export function defineChannel<T extends string, S extends z.ZodType, C extends z.ZodType = S>(
  m: ChannelModule<T, S, C>,
): ChannelModule<T, S, C> {
  return m;
}

/** Values as they are: structured consumers (webhooks) and plain-text parts. */
export const PLAIN: MessageFormat = { escape: (v) => v, html: false };

export type { ChannelModule, ConversationSupport, MessageFormat } from '../contracts/channel.js';
