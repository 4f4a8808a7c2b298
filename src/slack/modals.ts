import { isWritable, type Incident } from '../domain/incident.js';
import { slackActor, type SlackDeps } from './deps.js';
import { ephemeralMessage } from './errors.js';
import type { ModalContext } from './views/action-ids.js';
import { modal, section, SLACK_LIMITS, type ModalView } from './views/block-kit.js';
import { executeModal, mergeDeclaredVariables, previewVariables, type PreviewItem } from './views/execute-modal.js';
import { closeIncidentModal, createIncidentModal, resolveIncidentModal, updateIncidentModal, type TemplateChoice, type TemplateChoices } from './views/incident-modals.js';

/**
 * Builds the modal for a step and opens it on the user's trigger (valid for 3 s after the click
 * or command, which is why listeners ack first and open right after). A step that cannot start
 * (closed incident, nothing to deliver to) opens a short explanation instead, so the answer
 * reaches the user wherever they clicked: a channel, a DM or the App Home.
 */
export type IncidentStep = 'execute' | 'update' | 'resolve' | 'close';

export async function openCreateModal(deps: SlackDeps, triggerId: string, p: { title?: string; ctx: ModalContext }): Promise<void> {
  const view = createIncidentModal({ ...(p.title ? { title: p.title } : {}), templates: await templateChoices(deps), ctx: p.ctx });
  await deps.client.views.open({ trigger_id: triggerId, view });
}

export async function openStepModal(deps: SlackDeps, triggerId: string, step: IncidentStep, incidentId: string, user: { id: string; name?: string }): Promise<void> {
  let view: ModalView;
  try {
    view = await stepModal(deps, step, await deps.services.incidents.get(incidentId), user);
  } catch (e) {
    view = messageModal('Cannot do that', ephemeralMessage(e));
  }
  await deps.client.views.open({ trigger_id: triggerId, view });
}

async function stepModal(deps: SlackDeps, step: IncidentStep, incident: Incident, user: { id: string; name?: string }): Promise<ModalView> {
  if (!isWritable(incident)) return messageModal('Incident closed', `:lock: \`${incident.id}\` is closed; a closed incident cannot change.`);
  switch (step) {
    case 'update':
      return updateIncidentModal({ incident, templates: await templateChoices(deps), attached: await attachedTemplates(deps, incident) });
    case 'resolve':
      return resolveIncidentModal(incident);
    case 'close':
      return closeIncidentModal(incident);
    case 'execute':
      return buildExecuteModal(deps, incident, user);
  }
}

/** One input per declared variable of the attached templates, and the dry run as preview. */
async function buildExecuteModal(deps: SlackDeps, incident: Incident, user: { id: string; name?: string }): Promise<ModalView> {
  const s = deps.services;
  const templates = await Promise.all(incident.template_ids.map((id) => s.templates.get(id).catch(() => null)));
  const present = templates.filter((t) => t !== null);
  // Throws no_connections (and the like) before the user fills anything in.
  const result = await s.executions.execute(incident.id, { variables: previewVariables(mergeDeclaredVariables(present.map((t) => t.variables))) }, slackActor(user), { dryRun: true });
  const dry = result.dryRun ? result.deliveries : [];
  // Only templates that will actually be sent (they target an enabled connection) ask for values.
  const used = present.filter((t) => dry.some((d) => d.template_id === t.id));
  const variables = mergeDeclaredVariables(used.map((t) => t.variables));
  const names = await connectionNames(deps, dry.map((d) => d.connection_id));
  const templateNames = new Map(present.map((t) => [t.id, t.name]));
  const previews: PreviewItem[] = dry.map((d) => ({
    connectionName: names.get(d.connection_id) ?? d.connection_id,
    connectionType: d.connection_type,
    templateName: d.template_id === null ? null : (templateNames.get(d.template_id) ?? d.template_id),
    subject: d.subject,
    body: d.body,
  }));
  return executeModal({ incident, variables, previews });
}

async function connectionNames(deps: SlackDeps, ids: string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  await Promise.all(
    [...new Set(ids)].map(async (id) => {
      const c = await deps.services.connections.get(id).catch(() => null);
      if (c) out.set(id, c.name);
    }),
  );
  return out;
}

/** Templates to offer in the multi-select: the newest 100 (Slack's option limit), and whether more exist. */
async function templateChoices(deps: SlackDeps): Promise<TemplateChoices> {
  const page = await deps.services.templates.list({ limit: SLACK_LIMITS.staticOptions, cursor: null });
  return { newest: page.data.map((t) => ({ id: t.id, name: t.name })), more: page.nextCursor !== null };
}

/** The incident's attached templates by name, however old (one that no longer exists is left out). */
async function attachedTemplates(deps: SlackDeps, incident: Incident): Promise<TemplateChoice[]> {
  const found = await deps.services.templates.getMany(incident.template_ids);
  return found.filter((t) => t !== null).map((t) => ({ id: t.id, name: t.name }));
}

/** A modal that only explains (no submit). */
export function messageModal(title: string, text: string): ModalView {
  return modal({ callbackId: 'herald_message', title, close: 'OK', blocks: [section(text)] });
}
