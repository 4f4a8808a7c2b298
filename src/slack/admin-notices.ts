import type { WebClient } from '@slack/web-api';
import type { Logger } from 'pino';
import { slackError } from './announcer.js';
import type { SlackSettings } from './deps.js';
import { escapedText } from './views/block-kit.js';

/** What a notice says about the endpoint: no URL (its path or query may hold a token), its host only. */
export interface DisabledEndpointFacts {
  id: string;
  url: string;
  description: string;
}

export interface SlackAdminNoticeDeps {
  client: Pick<WebClient, 'chat' | 'conversations'>;
  /** `admins` (HERALD_SLACK_ADMINS) each get a direct message; `defaultChannel` (HERALD_SLACK_CHANNEL) a post. */
  settings: Pick<SlackSettings, 'admins' | 'defaultChannel'>;
  log: Logger;
}

const REASON_TEXT = {
  gone: 'it answered 410 Gone',
  failing: 'every attempt to reach it has failed for 3 days',
} as const;

/**
 * Tells the Slack admins what Herald did on its own outside any conversation: a direct message to
 * each admin and a post in HERALD_SLACK_CHANNEL when set. Each place is tried once; one that
 * refuses (an unknown user, a channel the bot is not in, Slack down) is logged and the others are
 * still told. The caller makes sure a notice is given once (docs/events.md).
 */
export class SlackAdminNotifier {
  constructor(private readonly d: SlackAdminNoticeDeps) {}

  async endpointDisabled(endpoint: DisabledEndpointFacts, reason: 'gone' | 'failing'): Promise<void> {
    const host = new URL(endpoint.url).host;
    const description = endpoint.description.trim();
    const named = description === '' ? '' : ` ("${escapedText(description, 200)}")`;
    const text =
      `:warning: Herald disabled the event endpoint \`${endpoint.id}\`${named} at ${host}: ${REASON_TEXT[reason]}. ` +
      `It receives no events until it is turned on again: PATCH /v1/event-endpoints/${endpoint.id} with {"enabled": true} once it is fixed.`;
    await this.tell(text, { endpoint: endpoint.id });
  }

  private async tell(text: string, context: Record<string, string>): Promise<void> {
    const post = (channel: string) =>
      this.d.client.chat.postMessage({ channel, text, unfurl_links: false, unfurl_media: false });
    for (const user of new Set(this.d.settings.admins)) {
      try {
        const opened = await this.d.client.conversations.open({ users: user });
        await post(opened.channel?.id ?? user);
      } catch (err) {
        this.d.log.warn({ ...context, err: slackError(err) }, 'Slack refused an admin notice (direct message)');
      }
    }
    if (this.d.settings.defaultChannel !== null)
      await post(this.d.settings.defaultChannel).catch((err: unknown) =>
        this.d.log.warn(
          { ...context, err: slackError(err), channel: this.d.settings.defaultChannel },
          'Slack refused an admin notice',
        ),
      );
  }
}
