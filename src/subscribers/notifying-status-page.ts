import type { StatusPagePort } from '../contracts/channel.js';
import type { IncidentWrite, RetractedUpdate } from './opener.js';

/**
 * The status page store as the status_page channel sees it once subscribers exist: every write
 * the real store makes, then the notice to subscribers it calls for (docs/subscribers.md). Only a
 * write with an `origin` (a delivery's) opens one.
 *
 * Opening is part of the write: when it fails, the call throws and the delivery retries. Both
 * halves are idempotent — the store rewrites the same update, the notice (keyed by the delivery)
 * opens once — so the retry finishes what the first attempt began.
 *
 * A retraction is the one write that destroys what its notice tells: the update's words are read
 * before the removal, and the notice is opened BEFORE the update is removed. Opened after, a
 * failure between the two would leave a retry with nothing left to read, and the retraction would
 * never be told.
 */

/** What the wrapper needs of the opener (SubscriberNoticeOpener). */
export interface IncidentNoticeOpener {
  readUpdate(incidentId: string, updateId: string): Promise<RetractedUpdate | null>;
  incidentWritten(w: IncidentWrite, before?: RetractedUpdate | null): Promise<void>;
}

export function wrapStatusPage(port: StatusPagePort, opener: IncidentNoticeOpener): StatusPagePort {
  return {
    async publish(p) {
      const ref = await port.publish(p);
      if (p.origin)
        await opener.incidentWritten({
          kind: 'incident_update',
          deliveryId: p.origin.deliveryId,
          executionId: p.origin.executionId,
          incidentId: p.incident.id,
          updateId: ref.id,
        });
      return ref;
    },

    async edit(p) {
      const ref = await port.edit(p);
      // null: the update was retracted meanwhile; there is nothing to tell.
      if (ref !== null && p.origin)
        await opener.incidentWritten({
          // An `edit`-mode announcement moves the one update it keeps current: a new update to subscribers.
          kind: p.origin.kind === 'correction' ? 'incident_correction' : 'incident_update',
          deliveryId: p.origin.deliveryId,
          executionId: p.origin.executionId,
          incidentId: p.incident.id,
          updateId: p.updateId,
        });
      return ref;
    },

    async remove(p) {
      if (p.origin) {
        const before = await opener.readUpdate(p.incidentId, p.updateId);
        // Gone already (a retry after the removal, whose notice was opened by the first attempt).
        if (before !== null)
          await opener.incidentWritten(
            {
              kind: 'incident_retraction',
              deliveryId: p.origin.deliveryId,
              executionId: p.origin.executionId,
              incidentId: p.incidentId,
              updateId: p.updateId,
            },
            before,
          );
      }
      await port.remove(p);
    },
  };
}
