import { isDomainError } from '../../domain/common/errors.js';
import type { Incident } from '../../domain/incident/incident.js';
import type { SlackDeps } from '../deps.js';
import { ephemeralMessage } from '../errors.js';
import { decodeContext, type ModalContext } from '../views/action-ids.js';
import { modal, section, SLACK_LIMITS, type ModalView } from '../views/block-kit.js';
import {
  executeModal,
  MAX_PREVIEWS,
  previewPlaceholder,
  type AudienceChoice,
  type PreviewItem,
} from '../views/execute-modal.js';
import type { ExecutePreparation } from '../../services/executions.js';
import { correctModal, retractModal } from '../views/correction-modals.js';
import {
  closeIncidentModal,
  createIncidentModal,
  resolveIncidentModal,
  updateIncidentModal,
  type TemplateChoice,
  type TemplateChoices,
} from '../views/incident-modals.js';

/**
 * Builds the modal for a step and opens it on the user's trigger (valid for 3 s after the click
 * or command, which is why listeners ack first and open right after). A step that cannot start
 * (closed incident, nothing to deliver to) opens a short explanation instead, so the answer
 * reaches the user wherever they clicked: a channel, a DM or the App Home.
 */
export type IncidentStep = 'execute' | 'update' | 'resolve' | 'close';

export async function openCreateModal(
  deps: SlackDeps,
  triggerId: string,
  p: { title?: string; ctx: ModalContext },
): Promise<void> {
  await openLoading(deps, triggerId, 'Declare an incident', async () =>
    createIncidentModal({ ...(p.title ? { title: p.title } : {}), templates: await templateChoices(deps), ctx: p.ctx }),
  );
}

export async function openStepModal(
  deps: SlackDeps,
  triggerId: string,
  step: IncidentStep,
  incidentId: string,
): Promise<void> {
  await openLoading(deps, triggerId, STEP_TITLES[step], () => stepModal(deps, step, incidentId));
}

/** What the Correct and Retract buttons under the receipts open. */
export type CorrectionStep = 'correct' | 'retract';

/** `value` is the button's: the incident and the execution, as a modal context. */
export async function openCorrectionModal(
  deps: SlackDeps,
  triggerId: string,
  step: CorrectionStep,
  value: string,
): Promise<void> {
  await openLoading(deps, triggerId, step === 'correct' ? 'Correct messages' : 'Retract messages', () =>
    correctionModal(deps, step, decodeContext(value)),
  );
}

const STEP_TITLES: Record<IncidentStep, string> = {
  execute: 'Execute incident',
  update: 'Update incident',
  resolve: 'Resolve incident',
  close: 'Close incident',
};

/** The callback id of the placeholder view shown while a modal's data loads. */
export const LOADING_CALLBACK = 'herald_loading';

/**
 * Opens a light "loading" view on the trigger at once (a trigger id is valid for 3 s, and reading
 * templates or rendering a preview under load may take longer), then replaces it with the real
 * view through views.update — the pattern Slack recommends for modals that need data.
 */
async function openLoading(
  deps: SlackDeps,
  triggerId: string,
  title: string,
  build: () => Promise<ModalView>,
): Promise<void> {
  const opened = await deps.client.views.open({ trigger_id: triggerId, view: loadingModal(title) });
  const viewId = opened.view?.id;
  let view: ModalView;
  try {
    view = await build();
  } catch (e) {
    // The loading view must not stay forever: it turns into the explanation.
    if (!isDomainError(e)) deps.log.error({ err: e }, 'could not build a Slack modal');
    view = messageModal('Cannot do that', ephemeralMessage(e));
  }
  if (viewId === undefined) {
    deps.log.warn('views.open answered without a view id; the loading view stays');
    return;
  }
  await deps.client.views.update({ view_id: viewId, view });
}

export function loadingModal(title: string): ModalView {
  return modal({
    callbackId: LOADING_CALLBACK,
    title,
    close: 'Cancel',
    blocks: [section(':hourglass_flowing_sand: Loading…')],
  });
}

async function stepModal(deps: SlackDeps, step: IncidentStep, incidentId: string): Promise<ModalView> {
  let incident: Incident;
  try {
    // The service decides whether the incident can change (404, 409 incident_closed).
    incident = await deps.services.incidents.getWritable(incidentId);
  } catch (e) {
    if (isDomainError(e) && e.code === 'incident_closed')
      return messageModal('Incident closed', `:lock: \`${incidentId}\` is closed; a closed incident cannot change.`);
    throw e;
  }
  switch (step) {
    case 'update':
      return updateIncidentModal({
        incident,
        templates: await templateChoices(deps),
        attached: await attachedTemplates(deps, incident),
      });
    case 'resolve':
      return resolveIncidentModal(incident);
    case 'close':
      return closeIncidentModal(incident);
    case 'execute':
      return buildExecuteModal(deps, incident.id);
  }
}

/**
 * The execute as it was sent (its variables, how many of its messages were delivered), for the
 * Correct or Retract modal. ExecutionService decides at submission whether it can be corrected;
 * a closed incident is explained here already, as for the incident's own buttons.
 */
async function correctionModal(deps: SlackDeps, step: CorrectionStep, ctx: ModalContext): Promise<ModalView> {
  const incidentId = ctx.incident_id ?? '';
  let incident: Incident;
  try {
    incident = await deps.services.incidents.getWritable(incidentId);
  } catch (e) {
    if (isDomainError(e) && e.code === 'incident_closed')
      return messageModal(
        'Incident closed',
        `:lock: \`${incidentId}\` is closed; its messages can no longer be corrected or retracted.`,
      );
    throw e;
  }
  const { execution, deliveries } = await deps.services.executions.get(incidentId, ctx.execution_id ?? '');
  const shown = {
    id: execution.id,
    variables: execution.variables,
    delivered: deliveries.filter((d) => d.status === 'delivered').length,
  };
  return step === 'correct'
    ? correctModal({ incident, execution: shown })
    : retractModal({ incident, execution: shown });
}

/** What `prepare` tells about audiences (ExecutionService.prepare; absent before any exists). */
interface AudiencePreparation {
  available_audiences: AudienceChoice[];
  audiences: {
    key: string;
    name: string;
    visibility: string;
    approval_required: boolean;
    total: number;
    deliveries: PreparedDelivery[];
    skipped: { reason: string; message: string } | null;
  }[];
}

type PreparedDelivery = ExecutePreparation['deliveries'][number];

const previewOf = (d: PreparedDelivery): PreviewItem => ({
  connectionName: d.connection_name,
  connectionType: d.connection_type,
  templateName: d.template_id === null ? null : (d.template_name ?? d.template_id),
  subject: d.subject,
  body: d.body,
});

/**
 * One input per declared variable of the templates that will be sent, and a preview of the first
 * few deliveries (only those are rendered: a large fan-out would take seconds to render whole).
 * ExecutionService.prepare decides all of it (and throws no_connections and the like before the
 * user fills anything in); the view only presents it. When audiences exist, the modal also has
 * the audience picker (`pick`: what is picked; default the internal audiences) and the preview is
 * per picked audience.
 */
export async function buildExecuteModal(deps: SlackDeps, incidentId: string, pick?: string[]): Promise<ModalView> {
  const prepare = (audiences?: string[]) => {
    const opts = { limit: MAX_PREVIEWS, placeholder: previewPlaceholder, ...(audiences ? { audiences } : {}) };
    return deps.services.executions.prepare(incidentId, opts) as Promise<
      ExecutePreparation & Partial<AudiencePreparation>
    >;
  };
  let prepared: ExecutePreparation & Partial<AudiencePreparation>;
  let problem: string | null = null;
  if (pick !== undefined && pick.length > 0) {
    try {
      prepared = await prepare(pick);
    } catch (e) {
      // A pick that sends nothing (or names an audience deleted meanwhile) is explained in the
      // preview; the picker stays so another pick can be made.
      if (!isDomainError(e) || e.code === 'incident_closed' || e.code === 'not_found') throw e;
      problem = ephemeralMessage(e);
      prepared = await prepare();
    }
  } else {
    prepared = await prepare();
  }
  const choices = prepared.available_audiences ?? [];
  if (choices.length === 0)
    return executeModal({
      incident: prepared.incident,
      variables: prepared.variables,
      previews: prepared.deliveries.map(previewOf),
      total: prepared.total,
    });
  const selected = (pick ?? choices.filter((a) => a.visibility === 'internal').map((a) => a.key)).filter((k) =>
    choices.some((a) => a.key === k),
  );
  if (pick === undefined && selected.length > 0) {
    try {
      prepared = await prepare(selected);
    } catch (e) {
      if (!isDomainError(e) || e.code === 'incident_closed' || e.code === 'not_found') throw e;
      problem = ephemeralMessage(e);
    }
  }
  const parts = problem === null && selected.length > 0 ? (prepared.audiences ?? []) : [];
  return executeModal({
    incident: prepared.incident,
    variables: prepared.variables,
    previews: [],
    audiences: {
      choices,
      selected,
      problem,
      previews: parts.map((a) => ({
        key: a.key,
        name: a.name,
        visibility: a.visibility,
        approval_required: a.approval_required,
        total: a.total,
        previews: a.deliveries.map(previewOf),
        skipped: a.skipped,
      })),
    },
  });
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
export function messageModal(title: string, text: string, close = 'OK'): ModalView {
  return modal({ callbackId: 'herald_message', title, close, blocks: [section(text)] });
}
