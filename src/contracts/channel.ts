import type { SendMailOptions } from 'nodemailer';
import { z } from 'zod';
import type { DomainError } from '../domain/common/errors.js';

/**
 * The contract between Herald and its channel modules, at the bottom of the layers: what a
 * channel type declares (src/channels/<type>/), the message a sender is given, the one result a
 * send answers and the I/O a sender may use. Everyone may import it; it imports only zod and a
 * domain/common leaf, so the domain, the ports, the channels and the delivery machinery can all
 * name these types without importing one another.
 */

// ── channel types ────────────────────────────────────────────────────────────────────────────

/**
 * The channel types Herald delivers to, in the order the README and the OpenAPI list them;
 * templates and connections share this list. src/channels/index.ts registers one module per
 * entry, in this order (it does not compile otherwise).
 */
export const CHANNEL_TYPES = [
  'slack',
  'teams',
  'discord',
  'email',
  'mattermost',
  'google_chat',
  'telegram',
  'webhook',
  'status_page',
] as const;
export type ChannelType = (typeof CHANNEL_TYPES)[number];

export const ChannelTypeSchema = z.enum(CHANNEL_TYPES).meta({ id: 'ChannelType' });

// ── what a channel type declares ─────────────────────────────────────────────────────────────

/** How rendered values are written for a channel (docs/explanation/delivery-semantics.md). */
export interface MessageFormat {
  /** Escapes one VALUE (an incident field, a variable) for the platform's markup (a plain function, never a method using `this`). */
  escape: (value: string) => string;
  /** True when the message also gets an HTML alternative (e-mail): values are HTML-escaped there. */
  html: boolean;
}

/**
 * What a platform can do with an incident's conversation, for one connection's config (docs/explanation/
 * living-updates.md): reply in a thread, edit a message it posted, delete one.
 */
export interface ConversationSupport {
  /** Later messages of an incident continue the first one's conversation (a thread, a reply chain, a mail thread, or a sequence in the payload). */
  thread: boolean;
  /** A posted message can be edited in place (corrections, and the `edit` update mode). */
  edit: boolean;
  /** A posted message can be deleted (retractions). */
  delete: boolean;
}

/** Pacing: a token bucket of `burst` tokens refilled at `perSecond`. */
export interface PacingRule {
  perSecond: number;
  burst: number;
}

/** A place secrets are sent to, named by a field of the config. */
export interface Destination {
  /** Dotted path into the request body, for errors: `config.webhook_url`. */
  field: string;
  /** `url` destinations must be https (unless allowed); `host` ones (SMTP) are judged by host only. */
  kind: 'url' | 'host';
  /** The URL or host as configured. */
  value: string;
  /** Normalized host name or address (lower-case, no brackets), what the policy judges. */
  host: string;
  /**
   * Secret keys (as in the connection's `secrets`) sent to this destination besides the field
   * itself: moving the destination to another host requires re-sending each of them.
   */
  secrets: string[];
}

/** The operator's outbound allow list (HERALD_OUTBOUND_ALLOW), as a type's own rules ask it. */
export interface AllowList {
  allows(hostOrIp: string): boolean;
}

export interface ConnectionTypeDefinition<S extends z.ZodType = z.ZodType, C extends z.ZodType = S> {
  /** The complete config, secrets included: what is stored (sealed) and what a PATCH must merge into. */
  configSchema: S;
  /** The config accepted on create, when it differs (a generated secret may be absent). */
  createConfigSchema: C;
  /** Top-level config fields whose values are secret: write-only, sealed at rest, never returned. */
  secretFields: readonly string[];
  /** Object fields whose every value is secret (webhook `headers`), presented as `<field>.<key>`. */
  secretMaps: readonly string[];
  /** Where this config sends things; platform APIs from the operator's configuration are not listed. */
  destinations(config: z.output<S>): Destination[];
  /** Name of the read-only check the tester runs (`auth.test`, `getMe`, …), or null when there is none. */
  readOnlyCheck(config: z.output<S>): string | null;
  /** Type-specific rules that need the allow list (legacy Teams URLs, Discord URL shape). */
  rules?(config: z.output<S>, allow: AllowList): DomainError | null;
  /** Fills generated values on create (a webhook's signing secret); randomness is injected. */
  complete?(config: z.output<C>, randomBytes: (n: number) => Buffer): z.output<S>;
  /** The config field returned once, as `signing_secret`, in the create response. */
  signingSecretField?: string;
}

/**
 * Everything Herald knows about one platform, declared by its folder src/channels/<type>/ (see
 * src/channels/channel.ts for the files). The I/O half is loaded lazily through `adapter()`, so
 * code that only validates or renders never loads an HTTP or SMTP client.
 */
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
  /**
   * The platform's "delivered" only means it accepted the message, to post it later (Teams
   * Workflows): a delivered test message is reported `accepted_unverified`, not `ok`.
   */
  acceptsOnly?: boolean;
  /**
   * What it sends is read by the public (the status page): it is never part of an execute's
   * "every enabled connection" (only named, or reached through an audience), and a connection
   * test never sends it a message.
   */
  publishesPublicly?: boolean;
  /** The I/O half (./send.ts), loaded on first use. */
  adapter(): Promise<ChannelAdapter<z.output<S>>>;
}

// ── the outbound message ─────────────────────────────────────────────────────────────────────

/** What a delivery does on its platform. */
export const MESSAGE_ACTIONS = ['post', 'edit', 'delete'] as const;
export type MessageAction = (typeof MESSAGE_ACTIONS)[number];

/** The kinds of execution: an announcement (execute), a correction, a retraction. */
export const MESSAGE_KINDS = ['announcement', 'correction', 'retraction'] as const;
export type MessageKind = (typeof MESSAGE_KINDS)[number];

/** Where a posted message lives on its platform (its schema: MessageRefSchema, domain/execution/conversation.ts). */
export interface MessageRef {
  /** The platform's id: Slack ts, Discord message id, Telegram message_id, Google Chat message name, e-mail Message-ID. */
  id: string;
  /** Where it is when the id alone does not say: Slack channel, Discord channel or thread, Telegram chat, Google Chat thread. */
  channel: string | null;
  /** A link to the message where the platform gives one. */
  permalink: string | null;
}

/** A message rendered for one connection. */
export interface RenderedContent {
  subject: string;
  body: string;
  /** E-mail only: the HTML part. */
  html?: string;
}

/** The conversation a message belongs to: one per incident per connection. */
export interface ConversationContext {
  /** 1 for the incident's first message to this connection, then 2, 3, … */
  sequence: number;
  /** The delivery before this one in the same conversation; null for the first. */
  previousDeliveryId: string | null;
  kind: MessageKind;
  /** For a correction or retraction: the delivery it corrects or retracts. */
  targetDeliveryId: string | null;
  /**
   * The connection keeps the incident's messages in one conversation (update mode `thread` or
   * `edit`); false when it posts each update on its own (`new_message`). A platform that threads
   * by a key of its own choosing (Google Chat's `threadKey`) sets it from the first message on.
   */
  threaded: boolean;
}

export interface OutboundMessage {
  deliveryId: string;
  executionId: string;
  incident: { id: string; title: string; severity: string; status: string; url: string | null };
  content: RenderedContent;
  /** Marked test messages (connection test with send_message) say so to the reader. */
  test?: boolean;
  /** Default `post`. `edit` and `delete` act on `target`, and are only asked of a channel whose `conversation(config)` says it can. */
  action?: MessageAction;
  /** For `edit` and `delete`: the message to change, as a previous send answered it. */
  target?: MessageRef | null;
  /**
   * For a `post`: the conversation's first message, to reply under (Slack `thread_ts`, Telegram
   * reply, e-mail `In-Reply-To`/`References`, Discord forum thread); null or absent starts the
   * conversation (or posts on its own when the connection posts each update as a new message).
   */
  thread?: MessageRef | null;
  /** Absent for a connection test. */
  conversation?: ConversationContext;
  /**
   * The public state an update is published with (the status page): the execute's
   * `public_status`, else mapped from the incident's status at execute time. Other channels ignore it.
   */
  publicStatus?: PublicStatus;
}

/** The public states of an incident update (Statuspage's incident statuses; domain/status/public.ts PUBLIC_STATES). */
export const PUBLIC_STATUSES = ['investigating', 'identified', 'monitoring', 'resolved'] as const;
export type PublicStatus = (typeof PUBLIC_STATUSES)[number];

/** The incident's status → the public state an update shows when the execute names none. */
export function publicStatusOf(incidentStatus: string): PublicStatus {
  switch (incidentStatus) {
    case 'identified':
    case 'monitoring':
      return incidentStatus;
    case 'resolved':
    case 'closed':
      return 'resolved';
    default:
      return 'investigating';
  }
}

// ── the result of a send ─────────────────────────────────────────────────────────────────────

/** Why a failure happened, beyond its outcome: what a connection test reports (not stored). */
export type FailureCause = 'policy' | 'auth' | 'not_found' | 'rate_limited';

/** What one send (or read-only check) did: delivered, worth retrying, or failed for good. */
export type SendResult =
  | {
      outcome: 'delivered';
      httpStatus: number | null;
      providerCode: string | null;
      latencyMs: number;
      /** The posted (or edited) message, when the platform says which it is; null or absent when it does not. */
      message?: MessageRef | null;
    }
  | {
      outcome: 'retryable';
      httpStatus: number | null;
      providerCode: string | null;
      latencyMs: number | null;
      retryAfterMs: number | null;
      error: string;
      /** The platform may have received it (time-out after sending): a retry may duplicate. */
      ambiguous: boolean;
      cause?: FailureCause;
    }
  | {
      outcome: 'permanent';
      httpStatus: number | null;
      providerCode: string | null;
      latencyMs: number | null;
      error: string;
      /** Why the destination is gone for good (404/410 on a webhook URL): disable the connection. */
      disable: string | null;
      cause?: FailureCause;
    };

// ── the sender and what it may use ───────────────────────────────────────────────────────────

/** The part of a connection a sender sees: its full config (secrets included) and its secret values. */
export interface SendTarget<Config> {
  config: Config;
  secrets: Record<string, string>;
}

/** Sends to one channel type; `Config` is that type's full config. */
export interface ChannelSender<Config = unknown> {
  send(target: SendTarget<Config>, message: OutboundMessage): Promise<SendResult>;
}

export interface OutboundRequest {
  method: string;
  url: string;
  headers?: Record<string, string>;
  /** Sent as given (JSON callers stringify); Content-Length is always set, never chunked. */
  body?: string | Buffer;
  /** Total budget from start to the end of the answer (default 10 s). */
  timeoutMs?: number;
}

export interface OutboundResponse {
  status: number;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  /** The answer as UTF-8 text, at most `maxResponseBytes` of it. */
  body: string;
  /** True when the answer was longer than the cap and was cut (the status is still real). */
  truncated: boolean;
  latencyMs: number;
}

/**
 * The guarded HTTP client senders use (src/delivery/outbound/http.ts): never follows a
 * redirect; a failed request throws an OutboundError, any other answer is returned as data.
 */
export interface OutboundHttp {
  request(req: OutboundRequest): Promise<OutboundResponse>;
}

/** An SMTP server as an e-mail connection names it. */
export interface SmtpServer {
  host: string;
  port: number;
  security: 'tls' | 'starttls' | 'none';
  username?: string | undefined;
  password?: string | undefined;
}

export type SmtpVerifyOutcome = { ok: true; latencyMs: number } | { ok: false; latencyMs: number; result: SendResult };

/** SMTP through the same guard as HTTP (src/channels/email/send.ts builds it). */
export interface SmtpClient {
  send(server: SmtpServer, mail: SendMailOptions): Promise<SendResult>;
  /** Connects, says EHLO, upgrades TLS and logs in as a send would, then quits: the read-only check. */
  verify(server: SmtpServer): Promise<SmtpVerifyOutcome>;
}

/** What every channel's I/O may use; each takes only what it needs. */
export interface ChannelDeps {
  /** The guarded HTTP client, with the operator's platform API bases trusted. */
  http: OutboundHttp;
  /** SMTP, through the same guard. */
  smtp: SmtpClient;
  /** SLACK_API_URL. */
  slackApiUrl: string;
  /** TELEGRAM_API_URL. */
  telegramApiUrl: string;
  /** Wall clock in ms (webhook timestamps, Discord embed time, HTTP-date Retry-After). */
  now?: () => number;
  /** Per-request budget for HTTP platforms (default: the client's, 10 s). */
  timeoutMs?: number;
  /** Herald's own public status page (the status_page channel); absent: such a send fails permanently. */
  statusPage?: StatusPagePort;
}

/** The incident an update is published for, as the sender knows it. */
export interface PublishedIncident {
  id: string;
  title: string;
  severity: string;
}

/**
 * What a status page write tells subscribers (docs/subscribers.md): the execution it is part of
 * and its kind (an announcement publishes an update, a correction edits it, a retraction removes it).
 */
export interface PublishOrigin {
  executionId: string;
  kind: MessageKind;
  /** The delivery making the write: the notice to subscribers is keyed by it, so a retry opens the same one. */
  deliveryId: string;
}

/** Publishes an update as the incident's next public update (the status_page channel's post). */
export interface PublishRequest {
  incident: PublishedIncident;
  origin?: PublishOrigin;
  /** The delivery that publishes it: the update's id, so a retry rewrites the same update. */
  deliveryId: string;
  status: PublicStatus;
  /** The rendered subject: the public incident's name when not empty (else the incident's title). */
  subject: string;
  body: string;
}

/** A correction of a published update: its text replaced in place. */
export interface EditPublishedRequest {
  incident: PublishedIncident;
  origin?: PublishOrigin;
  /** The update's id (the ref its publish answered). */
  updateId: string;
  subject: string;
  body: string;
  /**
   * A new public state: set when an execute keeps one update current (update mode `edit`);
   * absent for a correction, which keeps the state of what it corrects.
   */
  status?: PublicStatus;
}

/** A retraction: the update removed (the last one takes the public incident with it). */
export interface RemovePublishedRequest {
  incidentId: string;
  origin?: PublishOrigin;
  updateId: string;
}

/**
 * The public status page's store (src/store/public-incidents.ts). Every call is idempotent: a
 * retry of a publish rewrites the same update, an edit or removal of what is gone changes nothing.
 * Answers the published update's ref (id = the update id, channel = the incident id).
 */
export interface StatusPagePort {
  publish(p: PublishRequest): Promise<MessageRef>;
  edit(p: EditPublishedRequest): Promise<MessageRef | null>;
  remove(p: RemovePublishedRequest): Promise<void>;
}

/** A read-only check's answer: the platform's result and what to tell the user when it is fine. */
export interface CheckAnswer {
  result: SendResult;
  okDetail: string;
}

/** The I/O half of a channel module (its `send.ts`): how a message is sent and a connection checked. */
export interface ChannelAdapter<Config> {
  createSender(deps: ChannelDeps): ChannelSender<Config>;
  /**
   * The read-only check named by the config module's `readOnlyCheck` (Slack `auth.test`, Discord
   * GET webhook, Telegram `getMe`, SMTP verify); null when the type (or this config) has none.
   */
  check: ((config: Config, deps: ChannelDeps) => Promise<CheckAnswer | null>) | null;
}
