/**
 * Who may do what, and the API key service over it: built here for both the server
 * (./services.ts, buildServices) and the CLI (./cli.ts), so `herald keys …` runs the very
 * service the HTTP edge authenticates with. Its own module so the CLI loads no other service.
 */
import type { ApiKeyRepo, Clock, IdGenerator, TokenCrypto } from '../ports/index.js';
import { AccessPolicy } from '../services/access.js';
import { ApiKeyService } from '../services/api-keys.js';

export interface KeyServicePorts {
  clock: Clock;
  ids: IdGenerator;
  apiKeys: ApiKeyRepo;
  crypto: TokenCrypto;
  /** HERALD_SLACK_ADMINS: who may do admin work from Slack. */
  slackAdmins: readonly string[];
}

export function buildKeyServices(p: KeyServicePorts): { access: AccessPolicy; apiKeys: ApiKeyService } {
  const access = new AccessPolicy({ slackAdmins: p.slackAdmins });
  const apiKeys = new ApiKeyService({ repo: p.apiKeys, clock: p.clock, ids: p.ids, crypto: p.crypto, access });
  return { access, apiKeys };
}
