import { z } from 'zod';
import { iso, type Clock } from '../domain/common/clock.js';
import { DomainError, keptChanging, type FieldError } from '../domain/common/errors.js';
import { parseInput } from '../domain/common/validation.js';
import { refuseLiteralHost, type OutboundAllow } from '../domain/connection/address-policy.js';
import { maskAddress, SubscriberEmailSchema } from '../domain/subscriber/address.js';
import { firstTokenVersion } from '../domain/subscriber/token-version.js';
import { webhookSecretOf } from '../domain/common/webhook-signature.js';
import type {
  LinkToken,
  Subscriber,
  SubscriberKind,
  SubscriberLocale,
  SubscriberRepo,
  SubscriberState,
  SubscriberTokens,
  SubscriptionMail,
  SubscriptionMailQueue,
} from '../ports/subscribers.js';
import { LOST_RACE, retryOnConflict, type Attempt } from './retry.js';

/**
 * The public side of subscribing to the status page (docs/subscribers.md): subscribe, confirm,
 * manage and unsubscribe. Nobody is logged in: a subscribe request proves nothing about the
 * address it names, so its answer must not tell anything about that address either — the same
 * outcome whatever the address's state, and the mail (which only the address's owner reads) is
 * queued, never sent in the request, so the answer takes the same time too. Every later change
 * needs a signed link token from such a mail.
 */

export interface SubscriptionThrottle {
  /** A subscribe request from this client IP: allowed, or how long until it is. */
  ip(ip: string): Promise<{ ok: true } | { ok: false; retryAfterMs: number }>;
  /** Whether a mail to this subscriber may go now (at most one per 15 min); consumes when true. */
  address(subscriberId: string): Promise<boolean>;
}

/** The keyed hash of addresses (src/store/subscriber-key.ts's SubscriberIds; services reach no store). */
export interface SubscriberIdOf {
  idOf(kind: SubscriberKind, address: string): string;
}

export interface SubscriptionServiceDeps {
  repo: SubscriberRepo;
  ids: SubscriberIdOf;
  tokens: SubscriberTokens;
  mail: SubscriptionMailQueue;
  clock: Clock;
  throttle: SubscriptionThrottle;
  /** HERALD_SMTP_URL is set: e-mail subscriptions can be confirmed (webhooks need no relay). */
  emailEnabled: boolean;
  allow: OutboundAllow;
  /** The ids of the components on the page (what `components` may name). */
  componentIds(): Promise<Set<string>>;
  randomBytes(n: number): Buffer;
  /** HERALD_SUBSCRIBER_RETENTION (the store schedules the erasure; kept for the answer's wording). */
  retentionMs: number;
}

/** How long a confirmation link works. */
export const CONFIRM_TTL_MS = 48 * 3_600_000;
const MAX_COMPONENTS = 200;
const LOCALES = ['en', 'de'] as const satisfies readonly SubscriberLocale[];

/** What a subscribe request may carry (a form's fields or a JSON body); `website` is the honeypot. */
const SubscribeSchema = z.object({
  email: z.string().max(320).optional(),
  url: z.string().max(2048).optional(),
  components: z.array(z.string().min(1).max(128)).max(MAX_COMPONENTS).optional(),
  locale: z.enum(LOCALES).optional(),
  website: z.string().max(2048).optional(),
});

const UpdateSchema = z.object({
  components: z.array(z.string().min(1).max(128)).max(MAX_COMPONENTS),
  locale: z.enum(LOCALES),
});

const UrlSchema = z
  .string()
  .trim()
  .min(1)
  .max(2048)
  .refine((s) => URL.canParse(s) && ['http:', 'https:'].includes(new URL(s).protocol), {
    message: 'url must be an absolute https URL.',
  });

/** The one answer a subscribe request gets once its input is valid (whatever the address). */
export type SubscribeOutcome = 'accepted';

export type ConfirmOutcome =
  /** Confirmed now: its links for the page that says so. */
  | { result: 'confirmed'; manageToken: string }
  /** It was confirmed before (the link was used): "you are subscribed". */
  | { result: 'already_confirmed'; manageToken: string }
  /** Expired, used by a later request, or never valid: "subscribe again". */
  | { result: 'expired' };

/** What the manage page shows: never the whole address. */
export interface ManageView {
  kind: SubscriberKind;
  /** Masked (`j•••@example.com`). */
  address: string;
  state: SubscriberState;
  components: string[];
  locale: SubscriberLocale;
  /** For the page's unsubscribe button (a manage token also unsubscribes, but its own purpose reads clearer). */
  unsubscribeToken: string;
}

export type UnsubscribePreview =
  { result: 'ask'; address: string } | { result: 'unsubscribed' } | { result: 'invalid' };

export class SubscriptionService {
  constructor(private readonly d: SubscriptionServiceDeps) {}

  get emailEnabled(): boolean {
    return this.d.emailEnabled;
  }

  /**
   * POST /status/subscriptions. Refused only for what the request itself says (bad input, too
   * many requests from this IP); once valid, the outcome is `accepted` for a new, pending,
   * confirmed, unsubscribed or bounced address alike, and what changes is told by mail only.
   */
  async subscribe(input: unknown, o: { ip: string; locale: SubscriberLocale }): Promise<SubscribeOutcome> {
    const ip = await this.d.throttle.ip(o.ip);
    if (!ip.ok) {
      const retryAfter = Math.max(1, Math.ceil(ip.retryAfterMs / 1000));
      throw new DomainError(
        'rate_limited',
        `Too many subscribe requests from this address; retry after ${retryAfter} s.`,
        [],
        { retryAfter },
      );
    }
    const body = parseInput(SubscribeSchema, input);
    // A bot fills every field: it gets the answer a person gets, and nothing happens.
    if (body.website !== undefined && body.website.trim() !== '') return 'accepted';
    const { kind, address } = this.addressOf(body);
    const components = await this.checkComponents(body.components ?? []);
    const locale = body.locale ?? o.locale;
    await this.request(kind, address, components, locale);
    return 'accepted';
  }

  /** The record change and the mail a valid subscribe request makes (none for a bounced one). */
  private async request(
    kind: SubscriberKind,
    address: string,
    components: string[],
    locale: SubscriberLocale,
  ): Promise<void> {
    const id = this.d.ids.idOf(kind, address);
    const first = await this.d.repo.get(id);
    // Asked before the change: a throttled request must not replace a pending link's nonce
    // (the mail already sent would stop working while no new one goes out). Asked whatever the
    // state, so a bounced address costs the request the same steps as any other.
    const mayMail = await this.d.throttle.address(id);
    if (!mayMail || first?.state === 'bounced' || (kind === 'webhook' && first?.state === 'confirmed')) return;
    const mail = await retryOnConflict<SubscriptionMail | null>(
      async (): Promise<Attempt<SubscriptionMail | null>> => {
        const cur = await this.d.repo.get(id);
        const nowMs = this.d.clock.now().getTime();
        if (cur?.state === 'bounced') return null;
        if (cur?.state === 'confirmed')
          return kind === 'email' ? { kind: 'already_subscribed', subscriberId: id, nonce: null } : null;
        const next = this.pending(cur, id, kind, address, components, locale, nowMs);
        if (!(await this.d.repo.put(next, cur?.rev ?? null))) return LOST_RACE;
        return {
          kind: kind === 'email' ? 'confirm' : 'webhook_challenge',
          subscriberId: id,
          nonce: next.confirm!.nonce,
        };
      },
      () => keptChanging('subscription'),
    );
    if (mail !== null) await this.d.mail.enqueue(mail, this.d.clock.now().getTime());
  }

  /** The record of an address asked for now: new, again after leaving, or pending with a fresh link. */
  private pending(
    cur: Subscriber | null,
    id: string,
    kind: SubscriberKind,
    address: string,
    components: string[],
    locale: SubscriberLocale,
    nowMs: number,
  ): Subscriber {
    const now = iso(new Date(nowMs));
    return {
      id,
      kind,
      address,
      state: 'pending',
      components,
      locale,
      source: 'page',
      created_at: cur?.created_at ?? now,
      confirmed_at: null,
      unsubscribed_at: null,
      bounced_at: null,
      bounce_reason: null,
      // Kept (never reset): links of an earlier subscription must stay dead.
      token_version: cur?.token_version ?? firstTokenVersion(nowMs),
      confirm: {
        nonce: this.d.randomBytes(16).toString('base64url'),
        expires_at: iso(new Date(nowMs + CONFIRM_TTL_MS)),
      },
      // A fresh secret per challenge: the challenge hands it over, nothing was signed with the old one.
      webhook_secret: kind === 'webhook' ? webhookSecretOf(this.d.randomBytes(32)) : null,
      rev: (cur?.rev ?? 0) + 1,
    };
  }

  private addressOf(body: z.output<typeof SubscribeSchema>): { kind: SubscriberKind; address: string } {
    const email = body.email?.trim() ?? '';
    const url = body.url?.trim() ?? '';
    if ((email === '') === (url === ''))
      throw new DomainError('validation_failed', 'Send either an e-mail address (email) or a webhook URL (url).', [
        { field: email === '' ? 'email' : 'url', code: 'required', message: 'Send either email or url, not both.' },
      ]);
    if (email !== '') {
      if (!this.d.emailEnabled)
        throw new DomainError('validation_failed', 'E-mail subscriptions are not available on this status page.', [
          {
            field: 'email',
            code: 'email_subscriptions_off',
            message: 'E-mail subscriptions are not available on this status page.',
          },
        ]);
      const r = SubscriberEmailSchema.safeParse(email);
      if (!r.success)
        throw new DomainError('validation_failed', 'The e-mail address is not valid.', [
          { field: 'email', code: 'invalid_email', message: 'Enter a valid e-mail address.' },
        ]);
      return { kind: 'email', address: r.data };
    }
    const u = UrlSchema.safeParse(url);
    if (!u.success)
      throw new DomainError('validation_failed', 'The webhook URL is not valid.', [
        { field: 'url', code: 'invalid_format', message: 'url must be an absolute https URL.' },
      ]);
    this.checkUrl(u.data);
    return { kind: 'webhook', address: u.data };
  }

  /** The write-time address policy, as event endpoints and connections apply it (the guard checks again at send). */
  private checkUrl(raw: string): void {
    const url = new URL(raw);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (url.protocol !== 'https:' && !this.d.allow.allows(host))
      throw new DomainError('destination_not_allowed', 'url must use https.', [
        { field: 'url', code: 'https_required', message: 'url must use https.' },
      ]);
    const refusal = refuseLiteralHost(host, this.d.allow);
    if (refusal)
      throw new DomainError('destination_not_allowed', 'url is not allowed: it is not a public address.', [
        { field: 'url', code: 'destination_not_allowed', message: 'url is not a public address.' },
      ]);
  }

  /** The components named, once each, all of them on the page. */
  private async checkComponents(ids: string[]): Promise<string[]> {
    const unique = [...new Set(ids)];
    if (unique.length === 0) return [];
    const known = await this.d.componentIds();
    const errors: FieldError[] = [];
    ids.forEach((c, i) => {
      if (!known.has(c))
        errors.push({ field: `components.${i}`, code: 'unknown_component', message: 'No such component on the page.' });
    });
    if (errors.length > 0)
      throw new DomainError('unknown_component', 'components names a component that is not on the page.', errors);
    return unique.sort();
  }

  private verify(token: unknown, purposes: LinkToken['purpose'][]): LinkToken | null {
    if (typeof token !== 'string' || token.length === 0 || token.length > 2048) return null;
    const t = this.d.tokens.verify(token, this.d.clock.now().getTime());
    return t !== null && purposes.includes(t.purpose) ? t : null;
  }

  /** Whether a confirmation link may still be confirmed (the GET page, which changes nothing). */
  async confirmable(
    token: unknown,
  ): Promise<{ result: 'ok' } | { result: 'already_confirmed'; manageToken: string } | { result: 'expired' }> {
    const t = this.verify(token, ['confirm']);
    if (t === null) return { result: 'expired' };
    const sub = await this.d.repo.get(t.subscriberId);
    if (sub === null) return { result: 'expired' };
    if (sub.state === 'confirmed' && sub.token_version === t.version)
      return { result: 'already_confirmed', manageToken: this.manageToken(sub) };
    return this.confirmsNow(sub, t, this.d.clock.now().getTime()) ? { result: 'ok' } : { result: 'expired' };
  }

  private confirmsNow(sub: Subscriber, t: LinkToken, nowMs: number): boolean {
    return (
      sub.state === 'pending' &&
      sub.token_version === t.version &&
      sub.confirm !== null &&
      sub.confirm.nonce === t.nonce &&
      Date.parse(sub.confirm.expires_at) > nowMs
    );
  }

  /** POST confirm: single use (the nonce is cleared), valid for 48 h. */
  async confirm(token: unknown): Promise<ConfirmOutcome> {
    const t = this.verify(token, ['confirm']);
    if (t === null) return { result: 'expired' };
    return retryOnConflict<ConfirmOutcome>(
      async () => {
        const sub = await this.d.repo.get(t.subscriberId);
        if (sub === null) return { result: 'expired' };
        if (sub.state === 'confirmed' && sub.token_version === t.version)
          return { result: 'already_confirmed', manageToken: this.manageToken(sub) };
        const nowMs = this.d.clock.now().getTime();
        if (!this.confirmsNow(sub, t, nowMs)) return { result: 'expired' };
        const next: Subscriber = {
          ...sub,
          state: 'confirmed',
          confirmed_at: iso(new Date(nowMs)),
          confirm: null,
          rev: sub.rev + 1,
        };
        if (!(await this.d.repo.put(next, sub.rev))) return LOST_RACE;
        return { result: 'confirmed', manageToken: this.manageToken(next) };
      },
      () => keptChanging('subscription'),
    );
  }

  private manageToken(sub: Subscriber): string {
    return this.d.tokens.sign({ purpose: 'manage', subscriberId: sub.id, version: sub.token_version });
  }

  /** The subscription a manage link is for; null: the link is invalid or the subscriber left. */
  async manage(token: unknown): Promise<ManageView | null> {
    const t = this.verify(token, ['manage']);
    if (t === null) return null;
    const sub = await this.d.repo.get(t.subscriberId);
    return sub !== null && this.manageable(sub, t) ? this.view(sub) : null;
  }

  private manageable(sub: Subscriber, t: LinkToken): boolean {
    return sub.token_version === t.version && (sub.state === 'confirmed' || sub.state === 'pending');
  }

  private view(sub: Subscriber): ManageView {
    return {
      kind: sub.kind,
      address: maskAddress(sub.address),
      state: sub.state,
      components: sub.components,
      locale: sub.locale,
      unsubscribeToken: this.d.tokens.sign({
        purpose: 'unsubscribe',
        subscriberId: sub.id,
        version: sub.token_version,
      }),
    };
  }

  /** Saves the manage form: which components, which language. Null as for `manage`. */
  async update(token: unknown, input: unknown): Promise<ManageView | null> {
    const t = this.verify(token, ['manage']);
    if (t === null) return null;
    const body = parseInput(UpdateSchema, input);
    const components = await this.checkComponents(body.components);
    return retryOnConflict<ManageView | null>(
      async () => {
        const sub = await this.d.repo.get(t.subscriberId);
        if (sub === null || !this.manageable(sub, t)) return null;
        const next: Subscriber = { ...sub, components, locale: body.locale, rev: sub.rev + 1 };
        if (!(await this.d.repo.put(next, sub.rev))) return LOST_RACE;
        return this.view(next);
      },
      () => keptChanging('subscription'),
    );
  }

  /** The GET page before the one-click POST: whom the link unsubscribes (masked). */
  async unsubscribePreview(token: unknown): Promise<UnsubscribePreview> {
    const t = this.verify(token, ['unsubscribe', 'manage']);
    if (t === null) return { result: 'invalid' };
    const sub = await this.d.repo.get(t.subscriberId);
    if (sub === null || sub.token_version !== t.version || sub.state === 'unsubscribed')
      return { result: 'unsubscribed' };
    return { result: 'ask', address: maskAddress(sub.address) };
  }

  /**
   * RFC 8058 one-click: idempotent. A valid link whose subscriber already left, was erased or
   * moved on (a newer subscription) answers "unsubscribed" like the first click did; the
   * token_version moves, so every link sent so far stops working.
   */
  async unsubscribe(token: unknown): Promise<'unsubscribed' | 'invalid'> {
    const t = this.verify(token, ['unsubscribe', 'manage']);
    if (t === null) return 'invalid';
    return retryOnConflict<'unsubscribed'>(
      async () => {
        const sub = await this.d.repo.get(t.subscriberId);
        if (sub === null || sub.token_version !== t.version || sub.state === 'unsubscribed') return 'unsubscribed';
        const next: Subscriber = {
          ...sub,
          state: 'unsubscribed',
          unsubscribed_at: iso(this.d.clock.now()),
          confirm: null,
          token_version: sub.token_version + 1,
          rev: sub.rev + 1,
        };
        if (!(await this.d.repo.put(next, sub.rev))) return LOST_RACE;
        return 'unsubscribed';
      },
      () => keptChanging('subscription'),
    );
  }
}
