/**
 * One connection of every type with a distinctive secret in each secret field: the connection
 * API tests, the secret scan and the key-rotation test all use these.
 */
export const CONNECTION_SECRETS = {
  slackWebhook: 'https://hooks.slack.com/services/T0/B0/SLACKSECRETPART1',
  slackBot: 'xoxb-123-456-SLACKBOTSECRET',
  teams: 'https://prod-07.westeurope.logic.azure.com/workflows/TEAMSSECRET/triggers/manual/paths/invoke?sig=TEAMSSIG',
  discord: 'https://discord.com/api/webhooks/112233/DISCORDSECRETTOKEN',
  smtpPassword: 'SMTP-PASSWORD-SECRET',
  mattermost: 'https://mm.example.com/hooks/MATTERMOSTSECRET',
  googleChat: 'https://chat.googleapis.com/v1/spaces/AAA/messages?key=GCHATKEY&token=GCHATSECRET',
  telegram: '987654321:TELEGRAMSECRETTOKEN_abcdefghij',
  header: 'Bearer WEBHOOKHEADERSECRET',
};

export const CONNECTION_BODIES: Record<string, Record<string, unknown>> = {
  slack: {
    name: 'Slack #incidents',
    type: 'slack',
    config: { webhook_url: CONNECTION_SECRETS.slackWebhook, username: 'Herald', icon_emoji: ':rotating_light:' },
  },
  slack_bot: {
    name: 'Slack bot',
    type: 'slack',
    config: { bot_token: CONNECTION_SECRETS.slackBot, channel: 'C0123456' },
  },
  teams: { name: 'Teams', type: 'teams', config: { webhook_url: CONNECTION_SECRETS.teams } },
  discord: {
    name: 'Discord',
    type: 'discord',
    config: { webhook_url: CONNECTION_SECRETS.discord, username: 'Herald', thread_id: '998877' },
  },
  email: {
    name: 'Status mail',
    type: 'email',
    rate_limit_per_minute: 30,
    config: {
      host: 'smtp.example.com',
      port: 587,
      security: 'starttls',
      username: 'herald',
      password: CONNECTION_SECRETS.smtpPassword,
      from: 'Herald <status@example.com>',
      to: ['ops@example.com'],
      cc: ['cto@example.com'],
    },
  },
  mattermost: {
    name: 'Mattermost',
    type: 'mattermost',
    config: { webhook_url: CONNECTION_SECRETS.mattermost, channel: 'incidents' },
  },
  google_chat: {
    name: 'Google Chat',
    type: 'google_chat',
    config: { webhook_url: CONNECTION_SECRETS.googleChat, thread_key: 'incidents' },
  },
  telegram: {
    name: 'Telegram',
    type: 'telegram',
    config: { bot_token: CONNECTION_SECRETS.telegram, chat_id: '-1001234567890', parse_mode: 'HTML' },
  },
  webhook: {
    name: 'Webhook',
    type: 'webhook',
    config: { url: 'https://hooks.example.com/herald', headers: { Authorization: CONNECTION_SECRETS.header } },
  },
  // Nothing secret, nothing sent outside: the public page is Herald's own.
  status_page: {
    name: 'Status page',
    type: 'status_page',
    config: {
      title: 'Example status',
      public_url: 'https://status.example.com',
      time_zone: 'Europe/Berlin',
      locale: 'de',
      support_url: 'https://example.com/support',
    },
  },
};
