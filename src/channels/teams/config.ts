import { z } from 'zod';
import { DomainError } from '../../domain/common/errors.js';
import { defineConnectionType, hostOfUrl, httpUrl, urlDestination } from '../common/config-fields.js';

/** Microsoft Teams through a Power Automate "Workflows" webhook (the URL is the secret). */
const TeamsConfigSchema = z.strictObject({ webhook_url: httpUrl('webhook_url') }).meta({ id: 'TeamsConnectionConfig' });

export type TeamsConfig = z.output<typeof TeamsConfigSchema>;

/** Office 365 connector hosts: retired by Microsoft, so their URLs can never work again. */
function isLegacyConnectorHost(host: string): boolean {
  return host.endsWith('.webhook.office.com') || host === 'outlook.office.com' || host === 'outlook.office365.com';
}

export const teams = defineConnectionType({
  configSchema: TeamsConfigSchema,
  secretFields: ['webhook_url'],
  destinations: (c) => [urlDestination('webhook_url', c.webhook_url)],
  rules(c) {
    if (!isLegacyConnectorHost(hostOfUrl(c.webhook_url))) return null;
    const message =
      'This is an Office 365 connector (Incoming Webhook) URL. Microsoft retired Office 365 connectors in Teams, so it cannot ' +
      'deliver. In Teams, create a Workflows webhook instead ("Post to a channel when a webhook request is received", ' +
      'Power Automate) and use the URL it gives you.';
    return new DomainError('legacy_webhook_not_supported', message, [
      { field: 'config.webhook_url', code: 'legacy_webhook_not_supported', message },
    ]);
  },
});
