import { defineChannel, PLAIN } from '../channel.js';
import { webhook as connection } from './config.js';

/** Signed webhook: see ./config.ts (what a connection holds), ./send.ts (how a message goes out). */
export const webhookChannel = defineChannel({
  ...connection,
  type: 'webhook',
  label: 'Signed webhook',
  format: () => PLAIN,
  // The payload carries incident_id, sequence and previous_delivery_id: the receiver threads.
  // A receiver's copy cannot be changed; corrections and retractions arrive as their own events.
  conversation: () => ({ thread: true, edit: false, delete: false }),
  pacing: { perSecond: 20, burst: 20 },
  adapter: async () => (await import('./send.js')).adapter,
});
