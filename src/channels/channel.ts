import type { z } from 'zod';
import type { PacingRule } from '../domain/execution/delivery-policy.js';
import type { ChannelAdapter } from './adapter.js';
import type { ConnectionTypeDefinition } from './common/config-fields.js';

/**
 * Everything Herald knows about one platform, in one folder under src/channels/<type>/:
 *
 * - `config.ts`  the connection config schema, its secret fields and destinations (pure);
 * - `escape.ts`  how a value is escaped for the platform's markup, when it has its own (pure);
 * - `send.ts`    the sender, the platform's limits and answers, and its read-only check (I/O);
 * - `index.ts`   this module: the pieces above, the pacing default and the message format.
 *
 * The I/O half is loaded lazily through `adapter()`, so code that only validates or renders (the
 * domain, the CLI) never loads an HTTP or SMTP client. Adding a type is a folder like the others
 * plus one line in ./index.ts; test/unit/channel-modules.test.ts fails when a piece is missing.
 */

/** How rendered values are written for a channel (README "Delivery semantics"). */
export interface MessageFormat {
  /** Escapes one VALUE (an incident field, a variable) for the platform's markup (a plain function, never a method using `this`). */
  escape: (value: string) => string;
  /** True when the message also gets an HTML alternative (e-mail): values are HTML-escaped there. */
  html: boolean;
}

/**
 * What a platform can do with an incident's conversation, for one connection's config (README
 * "Living updates"): reply in a thread, edit a message it posted, delete one.
 */
export interface ConversationSupport {
  /** Later messages of an incident continue the first one's conversation (a thread, a reply chain, a mail thread, or a sequence in the payload). */
  thread: boolean;
  /** A posted message can be edited in place (corrections, and the `edit` update mode). */
  edit: boolean;
  /** A posted message can be deleted (retractions). */
  delete: boolean;
}

export const NO_CONVERSATION: ConversationSupport = { thread: false, edit: false, delete: false };

export interface ChannelModule<
  T extends string = string,
  S extends z.ZodType = z.ZodType,
  C extends z.ZodType = S,
> extends ConnectionTypeDefinition<S, C> {
  type: T;
  /** How the platform is named to people ("Google Chat"). */
  label: string;
  /** The format values are rendered in; `config` is null for a preview without a connection. */
  format(config: z.output<S> | null): MessageFormat;
  /** What this connection can do with a conversation (threads, edits, deletes). */
  conversation(config: z.output<S>): ConversationSupport;
  /** Default pacing, a token bucket per connection (a connection's `rate_limit_per_minute` wins). */
  pacing: PacingRule;
  /** The I/O half (./send.ts), loaded on first use. */
  adapter(): Promise<ChannelAdapter<z.output<S>>>;
}

/** Identity helper that keeps each module's literal type and config type. */
export function defineChannel<T extends string, S extends z.ZodType, C extends z.ZodType = S>(
  m: ChannelModule<T, S, C>,
): ChannelModule<T, S, C> {
  return m;
}

/** Values as they are: structured consumers (webhooks) and plain-text parts. */
export const PLAIN: MessageFormat = { escape: (v) => v, html: false };
