import type { WebClient } from '@slack/web-api';
import type { ChatPoster } from '../ports/index.js';
import { AnnouncementRouter, type AnnouncementPacing } from '../services/announcements.js';
import type { SlackDeps } from './deps.js';
import { announcementMessage } from './views/announcement.js';

/**
 * The Slack side of announcements. What to post where and when (channel fallback, which changes
 * refresh, receipts following the newest execute, coalescing, pacing) is AnnouncementRouter's
 * (services/announcements.ts); this wires it to Slack: the Web API client as its ChatPoster, the
 * announcement rendered as Block Kit, errors logged by their Slack code.
 */
export type AnnouncerPacing = AnnouncementPacing;

export class Announcer extends AnnouncementRouter {
  constructor(deps: SlackDeps, pacing: AnnouncerPacing = {}) {
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
    });
  }
}

/** The ChatPoster port over Slack's Web API: chat.postMessage and chat.update with Block Kit. */
export function slackChatPoster(client: Pick<WebClient, 'chat'>): ChatPoster {
  return {
    async post(channel, { incident, receipts }) {
      const message = announcementMessage(incident, receipts);
      const res = await client.chat.postMessage({ channel, text: message.text, blocks: message.blocks, unfurl_links: false });
      return res.channel && res.ts ? { channel: res.channel, ts: res.ts } : null;
    },
    async update({ channel, ts }, { incident, receipts }) {
      const message = announcementMessage(incident, receipts);
      await client.chat.update({ channel, ts, text: message.text, blocks: message.blocks });
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
