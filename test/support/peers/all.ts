import { startDiscord, type DiscordPeer } from './discord.js';
import { startGoogleChat, type GoogleChatPeer } from './google-chat.js';
import { startMattermost, type MattermostPeer } from './mattermost.js';
import { startSlack, type SlackPeer } from './slack.js';
import { startSmtp, type SmtpPeer, type SmtpPeerOptions } from './smtp.js';
import { startTeams, type TeamsPeer } from './teams.js';
import { startTelegram, type TelegramPeer } from './telegram.js';
import { startWebhookReceiver, type WebhookReceiver } from './webhook-receiver.js';

/** One peer of every channel type Herald delivers to, for a test that reaches them all. */
export interface AllPeers {
  slack: SlackPeer;
  teams: TeamsPeer;
  discord: DiscordPeer;
  mattermost: MattermostPeer;
  chat: GoogleChatPeer;
  telegram: TelegramPeer;
  hook: WebhookReceiver;
  smtp: SmtpPeer;
  /** Closes every one of them. */
  close(): Promise<void>;
}

/** Starts one peer of each platform at once, each with its defaults (`smtp`: the SMTP server's options). */
export async function startAllPeers(opts: { smtp?: SmtpPeerOptions } = {}): Promise<AllPeers> {
  const [slack, teams, discord, mattermost, chat, telegram, hook, smtp] = await Promise.all([
    startSlack(),
    startTeams(),
    startDiscord(),
    startMattermost(),
    startGoogleChat(),
    startTelegram(),
    startWebhookReceiver(),
    startSmtp(opts.smtp),
  ]);
  return {
    slack,
    teams,
    discord,
    mattermost,
    chat,
    telegram,
    hook,
    smtp,
    async close() {
      await Promise.all([slack, teams, discord, mattermost, chat, telegram, hook, smtp].map((p) => p.close()));
    },
  };
}
