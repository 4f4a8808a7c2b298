import { conversationOf } from '../domain/connection/connection.js';
import type { ThreadWait, ThreadWaitOutcome, WaitedFor } from '../domain/execution/conversation.js';
import { isTerminal, type Delivery } from '../domain/execution/execution.js';
import type {
  Clock,
  ConversationRepo,
  DeliveryTarget,
  ExecutionRepo,
  MessageAction,
  MessageRef,
  ThreadRoot,
} from '../ports/index.js';

/**
 * Where a delivery goes in its incident's conversation with the connection (docs/explanation/
 * living-updates.md), and the wait for the conversation's first message: an update due while that message
 * is still being sent would otherwise post on its own, however briefly it missed it (a platform
 * that answers slowly under load), so it waits until the first message is settled — delivered:
 * it replies under it; failed for good: it becomes the first message itself — or until the bound
 * (HERALD_THREAD_WAIT_MS) passes, and then posts on its own. It waits without holding a worker:
 * the job is delayed and looks again, and the wait's start is kept on the record (`thread_wait`).
 */

/** Where a message goes in its conversation, and how a wait for the first message ended. */
export interface Place {
  action: MessageAction;
  target: MessageRef | null;
  thread: MessageRef | null;
  threaded: boolean;
  waited: WaitedFor | null;
}

/** The first message is still being sent: look again after `ms`; `firstId` is the delivery waited for. */
export interface Wait {
  wait: { firstId: string; ms: number };
}

/** HERALD_THREAD_WAIT_MS' default. */
export const THREAD_WAIT_DEFAULT_MS = 30_000;

/**
 * How far back a conversation's earlier deliveries are followed to find its first message (each
 * one read is a round trip). Past it, the update posts as it would have without waiting.
 */
const CHAIN_LOOKBACK = 20;

/**
 * When to look again: soon at first (a platform that answers in a second or two), then less
 * often, a quarter of the time waited so far, within 250 ms..2 s and never past the bound.
 */
export function lookAgainMs(waitedMs: number, leftMs: number): number {
  return Math.max(1, Math.min(leftMs, Math.max(250, Math.min(2_000, Math.round(waitedMs / 4)))));
}

export class ConversationPlacer {
  constructor(
    private readonly d: {
      repo: ExecutionRepo;
      conversations: ConversationRepo;
      clock: Clock;
      threadWaitMs: number;
    },
  ) {}

  /**
   * Decided when the delivery is sent, since the conversation's first message may have been
   * delivered only just now: a correction or retraction does what it planned (edit, delete, or a
   * note); an update replies under the first message, or edits it in `edit` mode, or posts on its
   * own in `new_message` mode or when there is no first message — after waiting for one still
   * being sent.
   */
  async place(d: Delivery, target: DeliveryTarget, rootRead: Promise<ThreadRoot | null> | null): Promise<Place | Wait> {
    const mode = target.updateMode ?? 'thread';
    const threaded = mode !== 'new_message';
    if (d.planned_action === 'edit' || d.planned_action === 'delete')
      return { action: d.planned_action, target: d.target ?? null, thread: null, threaded, waited: null };
    const alone: Place = { action: 'post', target: null, thread: null, threaded, waited: null };
    const can = conversationOf(target);
    // The first message to this connection has nothing to continue (and needs no read).
    if (!threaded || (d.sequence ?? 1) <= 1 || !(can.thread || (mode === 'edit' && can.edit))) return alone;
    let root = await (rootRead ?? this.d.conversations.root(d.incident_id, d.connection_id));
    if (!root) {
      const wait = await this.waitForFirst(d);
      if ('wait' in wait) return wait;
      if (!('root' in wait)) return { ...alone, waited: wait.waited };
      root = wait.root;
    }
    const waited = d.thread_wait ? this.ended(d.thread_wait, 'delivered', root.deliveryId) : null;
    if (mode === 'edit' && can.edit && (d.execution_kind ?? 'announcement') === 'announcement')
      return { action: 'edit', target: root.ref, thread: null, threaded, waited };
    return can.thread ? { ...alone, thread: root.ref, waited } : { ...alone, waited };
  }

  /**
   * No conversation recorded yet: whether an earlier delivery of the conversation is still being
   * sent (it may become the first message), and if so whether to wait for it; or whether one was
   * delivered as the first message already but its place is not recorded yet (see chainFirst). A
   * delivery waits once.
   */
  private async waitForFirst(d: Delivery): Promise<Wait | { root: ThreadRoot } | { waited: WaitedFor | null }> {
    const held = d.thread_wait ?? null;
    const first = await this.chainFirst(d);
    if (first && 'root' in first) {
      // Heals the record too, should the first delivery's own write of it have been lost.
      await this.d.conversations.startIfNone(d.incident_id, d.connection_id, first.root);
      return first;
    }
    if (!first) return { waited: held ? this.ended(held, 'failed', held.delivery_id) : null };
    if (!held && (d.waited_for || this.d.threadWaitMs <= 0)) return { waited: null };
    const pending = first.pending;
    const nowMs = this.d.clock.now().getTime();
    const waitedMs = held ? Math.max(0, nowMs - Date.parse(held.since)) : 0;
    const leftMs = this.d.threadWaitMs - waitedMs;
    if (held && leftMs <= 0) return { waited: this.ended(held, 'timed_out', pending.id) };
    return { wait: { firstId: pending.id, ms: lookAgainMs(waitedMs, leftMs) } };
  }

  /**
   * The conversation's first message as its earlier deliveries tell it, following
   * `previous_delivery_id` back to the nearest announcement that is not failed or cancelled:
   * - not settled yet (queued, being sent, retrying): it may still become the first message
   *   (`pending`);
   * - delivered as a post on its own with a message, and not retracted: it is the first message
   *   (`root`). Its worker writes the delivery's record and the conversation's first message side
   *   by side, so an update can find the one before the other; reading it here closes that gap;
   * - delivered otherwise (a reply, an edit, no message named, or retracted): nothing to continue.
   * Corrections are passed over; retractions on the way say which messages are gone.
   */
  private async chainFirst(d: Delivery): Promise<{ pending: Delivery } | { root: ThreadRoot } | null> {
    const retracted = new Set<string>();
    let id = d.previous_delivery_id ?? null;
    for (let i = 0; id !== null && i < CHAIN_LOOKBACK; i++) {
      const p = await this.d.repo.getDelivery(id);
      if (!p) return null;
      const kind = p.execution_kind ?? 'announcement';
      if (kind === 'announcement') {
        if (!isTerminal(p.status)) return { pending: p };
        if (p.status === 'delivered') {
          const first = (p.action ?? 'post') === 'post' && !p.reply_to && p.message && !retracted.has(p.id);
          return first && p.message ? { root: { ref: p.message, deliveryId: p.id } } : null;
        }
      } else if (
        kind === 'retraction' &&
        p.planned_action === 'delete' &&
        p.target_delivery_id &&
        p.status !== 'failed' &&
        p.status !== 'cancelled'
      ) {
        retracted.add(p.target_delivery_id);
      }
      id = p.previous_delivery_id ?? null;
    }
    return null;
  }

  private ended(held: ThreadWait, outcome: ThreadWaitOutcome, deliveryId: string): WaitedFor {
    const ms = Math.max(0, this.d.clock.now().getTime() - Date.parse(held.since));
    return { delivery_id: deliveryId, ms, outcome };
  }

  /**
   * A delivered update that started the conversation becomes its first message (the first
   * recorded stays); a retracted first message is forgotten, so the next update starts afresh.
   */
  async advance(d: Delivery, place: Place): Promise<void> {
    if (
      place.action === 'post' &&
      place.thread === null &&
      d.message &&
      (d.execution_kind ?? 'announcement') === 'announcement'
    ) {
      await this.d.conversations.startIfNone(d.incident_id, d.connection_id, { ref: d.message, deliveryId: d.id });
    } else if (place.action === 'delete' && d.target_delivery_id) {
      await this.d.conversations.forget(d.incident_id, d.connection_id, d.target_delivery_id);
    }
  }
}
