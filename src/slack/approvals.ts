import type { WebClient } from '@slack/web-api';
import type { Logger } from 'pino';
import type { ApprovalMessageLog } from '../ports/notices.js';
import type { SlackServices } from './deps.js';
import { slackError } from './announcer.js';
import {
  approvalMessage,
  approvalThreadLine,
  type ApprovalFacts,
  type ApprovalMessageInput,
  type HeldMessage,
} from './views/approval.js';

/**
 * What the notifier reads of an approval notice (the service's ApprovalNotice has these fields):
 * the incident, the execution, the audience with its approval, who may approve, and the held
 * deliveries with their rendered words.
 */
export interface SlackApprovalNotice {
  incident: { id: string; title: string };
  execution: { id: string; kind?: 'announcement' | 'correction' | 'retraction' | undefined };
  audience: { key: string; name: string; visibility: string; approval: ApprovalFacts | null };
  approvers: { slack_user_ids: string[] };
  deliveries: {
    connection_id: string;
    connection_type: string;
    template_id: string | null;
    content: { subject: string; body: string };
  }[];
}

/** Something that keeps an announcement's receipts current (the Announcer). */
export interface ReceiptFollower {
  executed(incidentId: string, executionId: string): void;
}

export interface SlackApprovalNotifierDeps {
  client: Pick<WebClient, 'chat' | 'conversations'>;
  messages: ApprovalMessageLog;
  services: Pick<SlackServices, 'announcements' | 'connections' | 'templates'>;
  receipts: ReceiptFollower;
  log: Logger;
}

/**
 * The ApprovalNotifier for Slack. Pending: a direct message to each approver with the exact words
 * per channel and Approve / Reject, and a line in the announcement's thread. Decided: every DM
 * posted for it is updated to say who decided, when and why (buttons gone), and the thread gets
 * its line. Idempotent per (execution, audience, state): the DMs and thread lines posted are
 * recorded (ApprovalMessageLog), so a second call posts only what is missing and updates the rest.
 *
 * A Slack refusal about one person (no such user, a deactivated account) is logged and skipped:
 * asking again would never work. Anything else (Slack down, rate limited) throws, so the service
 * notifies again later and only what is still missing is sent.
 */
export class SlackApprovalNotifier {
  constructor(private readonly d: SlackApprovalNotifierDeps) {}

  async notify(notice: SlackApprovalNotice): Promise<void> {
    const approval = notice.audience.approval;
    if (approval === null) return;
    const executionId = notice.execution.id;
    const audience = notice.audience.key;
    await this.d.messages.exclusively(executionId, audience, async () => {
      const input: ApprovalMessageInput = {
        incident: notice.incident,
        execution: notice.execution,
        audience: notice.audience,
        approval,
        messages: await this.heldMessages(notice.deliveries),
      };
      const message = approvalMessage(input);
      const failures: unknown[] = [];
      const posted = await this.d.messages.dms(executionId, audience);
      if (approval.state === 'pending') {
        for (const user of new Set(notice.approvers.slack_user_ids)) {
          if (posted.has(user)) continue;
          await this.postDm(user, message)
            .then((ref) => (ref === null ? null : this.d.messages.recordDm(executionId, audience, user, ref)))
            .catch((err: unknown) => this.personal(err, failures, { executionId, audience }));
        }
      } else {
        for (const ref of posted.values()) {
          await this.d.client.chat
            .update({ channel: ref.channel, ts: ref.ts, text: message.text, blocks: message.blocks })
            .catch((err: unknown) => this.personal(err, failures, { executionId, audience }));
        }
      }
      if (!(await this.d.messages.threadLinePosted(executionId, audience, approval.state))) {
        const line = approvalThreadLine({ ...input, approvers: notice.approvers.slack_user_ids });
        await this.postThreadLine(notice.incident.id, line)
          .then(() => this.d.messages.recordThreadLine(executionId, audience, approval.state))
          .catch((err: unknown) => this.personal(err, failures, { executionId, audience }));
      }
      if (failures.length > 0) throw failures[0];
    });
    // The receipts show the held (then queued or cancelled) deliveries of this execution.
    this.d.receipts.executed(notice.incident.id, executionId);
  }

  /** Opens the bot's DM with the approver (im:write) and posts there; where it landed, for updates. */
  private async postDm(
    user: string,
    message: { text: string; blocks: unknown[] },
  ): Promise<{ channel: string; ts: string } | null> {
    const opened = await this.d.client.conversations.open({ users: user });
    const channel = opened.channel?.id ?? user;
    const res = await this.d.client.chat.postMessage({
      channel,
      text: message.text,
      blocks: message.blocks as never,
      unfurl_links: false,
      unfurl_media: false,
    });
    return res.channel && res.ts ? { channel: res.channel, ts: res.ts } : null;
  }

  /** A reply in the announcement's thread; nothing when the incident was never announced. */
  private async postThreadLine(incidentId: string, text: string): Promise<void> {
    const announcement = await this.d.services.announcements.find(incidentId);
    if (announcement === null) return;
    await this.d.client.chat.postMessage({
      channel: announcement.channel,
      thread_ts: announcement.ts,
      text,
      unfurl_links: false,
    });
  }

  /** The held deliveries as people read them: connection and template by name, the words as rendered. */
  private async heldMessages(deliveries: SlackApprovalNotice['deliveries']): Promise<HeldMessage[]> {
    const connections = new Map<string, string>();
    await Promise.all(
      [...new Set(deliveries.map((d) => d.connection_id))].map(async (id) => {
        const c = await this.d.services.connections.get(id).catch(() => null);
        if (c) connections.set(id, c.name);
      }),
    );
    const templateIds = [...new Set(deliveries.map((d) => d.template_id).filter((t) => t !== null))];
    const templates = new Map<string, string>();
    const found = await this.d.services.templates.getMany(templateIds).catch(() => []);
    for (const t of found) if (t) templates.set(t.id, t.name);
    return deliveries.map((d) => ({
      connectionName: connections.get(d.connection_id) ?? d.connection_id,
      connectionType: d.connection_type,
      templateName: d.template_id === null ? null : (templates.get(d.template_id) ?? d.template_id),
      subject: d.content.subject,
      body: d.content.body,
    }));
  }

  /** A refusal about one person or place is logged and skipped; anything else is kept to be thrown. */
  private personal(err: unknown, failures: unknown[], where: { executionId: string; audience: string }): void {
    const { code } = slackError(err);
    const platform = (err as { code?: unknown } | null)?.code === 'slack_webapi_platform_error';
    if (platform && code !== 'ratelimited') {
      this.d.log.warn(
        { err: slackError(err), execution_id: where.executionId, audience: where.audience },
        'Slack refused an approval message; not asking again',
      );
      return;
    }
    failures.push(err);
  }
}
