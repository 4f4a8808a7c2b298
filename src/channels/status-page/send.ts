import type { StatusPageConfig } from './config.js';
import type { ChannelAdapter, ChannelDeps, MessageRef, OutboundMessage, SendResult } from '../../contracts/channel.js';
import { publicStatusOf } from '../../contracts/channel.js';
import { refused } from '../common/http-outcome.js';

/**
 * The status page publishes into Herald's own store, through the StatusPagePort (ChannelDeps
 * `statusPage`, src/store/public-incidents.ts): no HTTP, nothing leaves Herald.
 *
 * - `post` publishes the message as the incident's next public update (its id = the delivery id,
 *   so a retry rewrites the same update), creating the public incident on the first one;
 * - `edit` (a correction, or the `edit` update mode) replaces that update's text in place, marked
 *   updated;
 * - `delete` (a retraction) removes it; the last one takes the public incident off the page.
 *
 * The ref answered is `{id: update id, channel: incident id, permalink: the incident's public
 * page}`: what a correction or retraction is later given back as its target. A connection test
 * never publishes (the service refuses send_message on a status page before it gets here; a test
 * message reaching the sender is refused again, so no customer ever reads one).
 */

/** The page's link to an incident: `<public_url>/incidents/<id>`. */
export function incidentPermalink(config: Pick<StatusPageConfig, 'public_url'>, incidentId: string): string {
  return `${config.public_url}/incidents/${encodeURIComponent(incidentId)}`;
}

const delivered = (message: MessageRef | null, latencyMs: number): SendResult => ({
  outcome: 'delivered',
  httpStatus: null,
  providerCode: null,
  latencyMs,
  message,
});

export function createStatusPageSender(deps: Pick<ChannelDeps, 'statusPage'>) {
  return {
    async send(target: { config: StatusPageConfig }, message: OutboundMessage): Promise<SendResult> {
      const port = deps.statusPage;
      if (port === undefined) return refused('this Herald process has no status page store to publish to');
      if (message.test === true) return refused('a test message is never published on the public status page');
      const started = performance.now();
      const took = () => Math.round(performance.now() - started);
      const incident = { id: message.incident.id, title: message.incident.title, severity: message.incident.severity };
      // Subscribers are told of what this write changes (docs/subscribers.md), once per delivery.
      const origin = {
        executionId: message.executionId,
        kind: message.conversation?.kind ?? 'announcement',
        deliveryId: message.deliveryId,
      };
      const link = (ref: MessageRef): MessageRef => ({
        ...ref,
        permalink: incidentPermalink(target.config, incident.id),
      });
      try {
        switch (message.action ?? 'post') {
          case 'post': {
            const ref = await port.publish({
              incident,
              origin,
              deliveryId: message.deliveryId,
              status: message.publicStatus ?? publicStatusOf(message.incident.status),
              subject: message.content.subject,
              body: message.content.body,
            });
            return delivered(link(ref), took());
          }
          case 'edit': {
            const updateId = message.target?.id;
            if (updateId === undefined) return refused('there is no published update to edit');
            const ref = await port.edit({
              incident,
              origin,
              updateId,
              subject: message.content.subject,
              body: message.content.body,
              // An execute editing the one update it keeps current (update mode `edit`) moves its state too.
              ...(message.conversation?.kind === 'announcement' && message.publicStatus !== undefined
                ? { status: message.publicStatus }
                : {}),
            });
            // Retracted meanwhile: there is nothing left to correct, and nothing to publish instead.
            if (ref === null) return refused('the published update no longer exists (it was retracted)');
            return delivered(link(ref), took());
          }
          case 'delete': {
            const updateId = message.target?.id;
            if (updateId === undefined) return refused('there is no published update to remove');
            await port.remove({ incidentId: incident.id, updateId, origin });
            return delivered(null, took());
          }
        }
      } catch (e) {
        // The store (Redis) failed or kept changing: every call is idempotent, so a retry is safe.
        return {
          outcome: 'retryable',
          httpStatus: null,
          providerCode: null,
          latencyMs: took(),
          retryAfterMs: null,
          error: `the status page store failed: ${(e as Error).message}`,
          ambiguous: false,
        };
      }
    },
  };
}

/** Nothing outside to ask: the page is Herald's own. */
export const adapter: ChannelAdapter<StatusPageConfig> = {
  createSender: (deps) => createStatusPageSender(deps),
  check: null,
};
