import type { WebClient } from '@slack/web-api';
import type { ChatPoster } from '../ports/index.js';
import { AnnouncementRouter, type AnnouncementPacing } from '../services/announcement-router.js';
import type { SlackDeps } from './deps.js';
import { announcementMessage, reminderMessage } from './views/announcement.js';

/**
 * The Slack side of announcements. What to post where and when (channel fallback, which changes
 * refresh, receipts following the newest execute, coalescing, pacing) is AnnouncementRouter's
 * (services/announcement-router.ts); this wires it to Slack: the Web API client as its ChatPoster, the
 * announcement rendered as Block Kit, errors logged by their Slack code.
 */
export type AnnouncerPacing = AnnouncementPacing;

export class Announcer extends AnnouncementRouter {
  constructor(deps: SlackDeps, pacing: AnnouncerPacing) {
    const s = deps.services;
    super({
      store: s.announcements,
      incidents: s.incidents,
      executions: s.executions,
      connections: s.connections,
      chat: slackChatPoster(deps.client),
      defaultChannel: deps.settings.defaultChannel,
      pacing,
      log: deps.log,
      describeError: slackError,
      now: () => deps.now(),
    });
  }
}

/**
 * The ChatPoster port over Slack's Web API: chat.postMessage and chat.update with Block Kit, and
 * reminders as replies in the announcement's thread (chat.postMessage with thread_ts).
 */
export function slackChatPoster(client: Pick<WebClient, 'chat'>): ChatPoster {
  return {
    async post(channel, { incident, receipts, nextUpdate }) {
      const message = announcementMessage(incident, receipts, nextUpdate ?? null);
      const res = await client.chat.postMessage({
        channel,
        text: message.text,
        blocks: message.blocks,
        unfurl_links: false,
      });
      return res.channel && res.ts ? { channel: res.channel, ts: res.ts } : null;
    },
    async update({ channel, ts }, { incident, receipts, nextUpdate }) {
      const message = announcementMessage(incident, receipts, nextUpdate ?? null);
      await client.chat.update({ channel, ts, text: message.text, blocks: message.blocks });
    },
    async postReminder({ channel, ts }, content) {
      await client.chat.postMessage({
        channel,
        thread_ts: ts,
        text: reminderMessage(content).text,
        unfurl_links: false,
      });
    },
  };
}

/** Web API errors carry `data.error` (e.g. `channel_not_found`); log that, never the request. */
export function slackError(err: unknown): { message: string; code?: string } {
  if (err instanceof Error) {
    const data = (err as Error & { data?: { error?: unknown } }).data;
    return { message: err.message, ...(typeof data?.error === 'string' ? { code: data.error } : {}) };
  }
  return { message: String(err) };
}
