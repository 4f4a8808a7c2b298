import type { WebClient } from '@slack/web-api';
import type { Logger } from 'pino';
import type { Actor } from '../domain/common/actor.js';
import type { IdempotencyStore } from '../ports/index.js';
import type { AccessPolicy } from '../services/access.js';
import type { AdminViewService } from '../services/admin-view.js';
import type { AnnouncementService } from '../services/announcement-service.js';
import type { ApiKeyService } from '../services/api-keys.js';
import type { ConnectionService } from '../services/connections.js';
import type { ExecutionService } from '../services/executions.js';
import type { IncidentService } from '../services/incidents.js';
import type { TemplateService } from '../services/templates.js';

export interface SlackServices {
  incidents: Pick<IncidentService, 'create' | 'get' | 'getWritable' | 'list' | 'update' | 'close'>;
  apiKeys: Pick<ApiKeyService, 'create' | 'revoke'>;
  templates: Pick<TemplateService, 'get' | 'getMany' | 'list' | 'search'>;
  connections: Pick<ConnectionService, 'get' | 'test'>;
  /** The admin part of the App Home (refused to non-admins by the service). */
  admin: Pick<AdminViewService, 'overview'>;
  executions: Pick<ExecutionService, 'execute' | 'get' | 'precheck' | 'prepare' | 'correct' | 'retract'>;
  announcements: AnnouncementService;
  /** Approve / Reject from an approver's DM (the service decides who may, and records one decision). */
  approvals: ApprovalDecisions;
}

/** The approval decision the Slack buttons call (the approval service's `decide`). */
export interface ApprovalDecisions {
  decide(
    incidentId: string,
    executionId: string,
    input: { decision: 'approve' | 'reject'; reason?: string; audiences?: string[] },
    actor: Actor,
  ): Promise<unknown>;
}

export interface SlackSettings {
  /** HERALD_SLACK_ADMINS: Slack user ids that see and may use the admin parts of the App Home. */
  admins: readonly string[];
  /** HERALD_SLACK_CHANNEL: where incidents created outside Slack are announced. */
  defaultChannel: string | null;
}

export interface SlackDeps {
  services: SlackServices;
  /**
   * Who may do admin work (built from settings.admins), asked here only for presentation (which
   * parts of the Home to show, whether to open an admin form); the services enforce it.
   */
  access: AccessPolicy;
  settings: SlackSettings;
  /** The bot's Web API client (SLACK_API_URL, SLACK_BOT_TOKEN). */
  client: WebClient;
  /** Deduplicates Slack's retries and double submissions (view ids, trigger ids). */
  idempotency: IdempotencyStore;
  log: Logger;
  now(): Date;
}

/** The Slack user behind a request, as recorded on the incident timeline. */
export function slackActor(user: { id: string; name?: string | undefined; username?: string | undefined }): Actor {
  return { type: 'slack_user', id: user.id, name: user.name ?? user.username ?? user.id };
}

/** The actor AccessPolicy judges for a Slack user id. */
export function slackUser(userId: string): Pick<Actor, 'type' | 'id'> {
  return { type: 'slack_user', id: userId };
}
