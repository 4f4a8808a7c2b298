import type { Config } from '../config.js';

/** HERALD_ROLE: which parts of Herald this process runs. */
export type Role = Config['HERALD_ROLE'];

/** What a role runs, decided here once; main.ts and the composition files only read it. */
export interface RolePlan {
  role: Role;
  /** Serves /v1, the probes, metrics and (HTTP mode) Slack's requests on HOST:PORT. */
  serveHttp: boolean;
  /** Runs the delivery worker and its outbox sweep. */
  runWorker: boolean;
  /** Sends the update cadence's reminders (the worker's loop: due reminders are taken under a lease). */
  runReminders: boolean;
  /**
   * Receives Slack's commands, buttons and submissions (HTTP mode or Socket Mode). A worker does
   * not: with the bot token it only keeps announcements current (delivery receipts, reminders).
   */
  receiveSlack: boolean;
}

/**
 * - api: answers requests and enqueues; sends nothing.
 * - worker: sends deliveries and reminders; no HTTP server, no Slack requests.
 * - all (the default): both in one process.
 */
export function rolePlan(role: Role): RolePlan {
  switch (role) {
    case 'api':
      return { role, serveHttp: true, runWorker: false, runReminders: false, receiveSlack: true };
    case 'worker':
      return { role, serveHttp: false, runWorker: true, runReminders: true, receiveSlack: false };
    case 'all':
      return { role, serveHttp: true, runWorker: true, runReminders: true, receiveSlack: true };
  }
}
