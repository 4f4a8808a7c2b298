import type { Logger } from 'pino';
import type { Clock } from '../domain/common/clock.js';
import type { PublicPageConfig } from '../domain/status/public.js';
import type {
  Subscriber,
  SubscriberLocale,
  SubscriberRepo,
  SubscriberTokens,
  SubscriptionMail,
  SubscriptionMailQueue,
} from '../ports/subscribers.js';
import { LOST_RACE, retryOnConflict } from '../services/retry.js';
import type { RenderedMail, SubscriberLinks } from './mail.js';
import type { Relay } from './relay.js';
import type { SubscriberWebhook } from './webhook.js';

/**
 * The subscription's own mail (docs/subscribers.md): the confirmation link, the "already
 * subscribed" note and a webhook's challenge, queued by the subscribe request (which never sends:
 * so every answer takes the same time) and sent here by the worker.
 *
 * Each item is checked against the record when it is sent, not when queued: a confirmation goes
 * only to a subscriber still pending with that nonce (a newer request made a newer link), "already
 * subscribed" only to one still confirmed, a challenge only to a pending webhook with that nonce.
 * A challenge is tried once (it stays pending, and expires like any pending one); a confirmation
 * the relay could not take now is tried again when its lease runs out, until its link expires.
 */

/** The rendering tx mail needs (src/subscribers/mail.ts and payload.ts). */
export interface SubscriptionContent {
  links(publicUrl: string, tokens: { manage: string; unsubscribe: string }): SubscriberLinks;
  confirmMail(page: { title: string; public_url: string }, locale: SubscriberLocale, confirmUrl: string): RenderedMail;
  alreadySubscribedMail(
    page: { title: string; public_url: string },
    locale: SubscriberLocale,
    links: SubscriberLinks,
  ): RenderedMail;
  challengePayload(o: {
    challenge: string;
    secret: string;
    links: SubscriberLinks;
    page: { title: string; public_url: string };
  }): Record<string, unknown>;
}

export interface SubscriptionMailSenderDeps {
  queue: SubscriptionMailQueue;
  subscribers: SubscriberRepo;
  tokens: SubscriberTokens;
  relay: Relay | null;
  from: string | null;
  webhook: SubscriberWebhook;
  content: SubscriptionContent;
  /** The page's settings (null: no page is claimed; nothing can be confirmed there). */
  page(): Promise<PublicPageConfig | null>;
  clock: Clock;
  randomBytes(n: number): Buffer;
  log: Logger;
  leaseMs?: number;
}

type Item = SubscriptionMail & { lease: number };

/** What became of an item: done (finished), or left for another try when its lease ends. */
type Result = 'done' | 'again';

export class SubscriptionMailSender {
  private readonly leaseMs: number;

  constructor(private readonly d: SubscriptionMailSenderDeps) {
    this.leaseMs = d.leaseMs ?? 60_000;
  }

  /** Sends what is due; answers how many items it handled. */
  async runDue(limit = 20): Promise<number> {
    const items = await this.d.queue.claim(this.now(), this.leaseMs, limit);
    if (items.length === 0) return 0;
    const page = await this.d.page();
    await Promise.all(
      items.map(async (item) => {
        let result: Result;
        try {
          result = page === null ? 'done' : await this.handle(item, page);
        } catch (err) {
          this.d.log.warn(
            { subscriber: item.subscriberId, kind: item.kind, err: err instanceof Error ? err.message : String(err) },
            'subscription mail failed',
          );
          result = 'again';
        }
        if (result === 'done') await this.d.queue.finish(item);
      }),
    );
    return items.length;
  }

  private async handle(item: Item, page: PublicPageConfig): Promise<Result> {
    const sub = await this.d.subscribers.get(item.subscriberId);
    if (sub === null) return 'done';
    switch (item.kind) {
      case 'confirm':
        return this.confirm(item, sub, page);
      case 'already_subscribed':
        return this.alreadySubscribed(sub, page);
      case 'webhook_challenge':
        return this.challenge(item, sub, page);
    }
  }

  private async confirm(item: Item, sub: Subscriber, page: PublicPageConfig): Promise<Result> {
    const c = sub.confirm;
    if (sub.kind !== 'email' || sub.state !== 'pending' || c === null || c.nonce !== item.nonce) return 'done';
    const expiresMs = Date.parse(c.expires_at);
    if (expiresMs <= this.now()) return 'done';
    const token = this.d.tokens.sign({
      purpose: 'confirm',
      subscriberId: sub.id,
      version: sub.token_version,
      nonce: c.nonce,
      expiresMs,
    });
    const url = `${page.public_url}/subscriptions/confirm?token=${encodeURIComponent(token)}`;
    const mail = this.d.content.confirmMail(pageOf(page), sub.locale, url);
    const out = await this.mail(sub, mail, `<confirm.${c.nonce}.${sub.id}@herald>`);
    // A relay that cannot take it now gets it again when the lease ends (until the link expires).
    return out === 'retryable' ? 'again' : 'done';
  }

  private async alreadySubscribed(sub: Subscriber, page: PublicPageConfig): Promise<Result> {
    if (sub.kind !== 'email' || sub.state !== 'confirmed') return 'done';
    const mail = this.d.content.alreadySubscribedMail(pageOf(page), sub.locale, this.links(sub, page));
    const stamp = this.d.randomBytes(8).toString('hex');
    // A courtesy note: one try is enough (the person may simply ask again).
    await this.mail(sub, mail, `<subscribed.${stamp}.${sub.id}@herald>`);
    return 'done';
  }

  private async challenge(item: Item, sub: Subscriber, page: PublicPageConfig): Promise<Result> {
    const c = sub.confirm;
    if (sub.kind !== 'webhook' || sub.state !== 'pending' || c === null || c.nonce !== item.nonce) return 'done';
    if (sub.webhook_secret === null) return 'done';
    const challenge = this.d.randomBytes(24).toString('base64url');
    const payload = this.d.content.challengePayload({
      challenge,
      secret: sub.webhook_secret,
      links: this.links(sub, page),
      page: pageOf(page),
    });
    const ok = await this.d.webhook.challenge(sub, payload, challenge);
    this.d.log.info({ subscriber: sub.id, confirmed: ok }, 'webhook subscriber challenged');
    if (ok) await this.confirmed(sub.id, c.nonce);
    return 'done';
  }

  /** The webhook answered its challenge: confirmed, if still the pending record that was challenged. */
  private async confirmed(id: string, nonce: string): Promise<void> {
    await retryOnConflict(
      async () => {
        const cur = await this.d.subscribers.get(id);
        if (cur === null || cur.state !== 'pending' || cur.confirm?.nonce !== nonce) return true;
        const next: Subscriber = {
          ...cur,
          state: 'confirmed',
          confirmed_at: this.d.clock.now().toISOString(),
          confirm: null,
          rev: cur.rev + 1,
        };
        return (await this.d.subscribers.put(next, cur.rev)) ? true : LOST_RACE;
      },
      () => new Error(`subscriber ${id} kept changing`),
      { attempts: 10 },
    );
  }

  private links(sub: Subscriber, page: PublicPageConfig): SubscriberLinks {
    const version = sub.token_version;
    return this.d.content.links(page.public_url, {
      manage: this.d.tokens.sign({ purpose: 'manage', subscriberId: sub.id, version }),
      unsubscribe: this.d.tokens.sign({ purpose: 'unsubscribe', subscriberId: sub.id, version }),
    });
  }

  private async mail(sub: Subscriber, mail: RenderedMail, messageId: string): Promise<string> {
    if (this.d.relay === null || this.d.from === null) return 'failed';
    const out = await this.d.relay.send({
      from: this.d.from,
      to: sub.address,
      subject: mail.subject,
      text: mail.text,
      html: mail.html,
      headers: mail.headers,
      messageId,
    });
    if (out.outcome !== 'delivered')
      this.d.log.warn({ subscriber: sub.id, outcome: out.outcome, error: out.error }, 'subscription mail not sent');
    return out.outcome;
  }

  private now(): number {
    return this.d.clock.now().getTime();
  }
}

const pageOf = (p: PublicPageConfig) => ({ title: p.title, public_url: p.public_url });
