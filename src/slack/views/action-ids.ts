/**
 * The ids that tie a view to its handler: button action ids, modal callback ids and the App Home
 * buttons. Views set them, listeners in slack/listeners/actions.ts and slack/listeners/submissions.ts match on them.
 */
export const ACTIONS = {
  incidentNew: 'incident_new',
  incidentExecute: 'incident_execute',
  incidentUpdate: 'incident_update',
  incidentResolve: 'incident_resolve',
  incidentClose: 'incident_close',
  connectionTest: 'connection_test',
  connectionTestSend: 'connection_test_send',
  apiKeyGenerate: 'api_key_generate',
  apiKeyRevoke: 'api_key_revoke',
  executionCorrect: 'execution_correct',
  executionRetract: 'execution_retract',
  /** The execute modal's "Next update in" select (only acked: its value comes with the submission). */
  nextUpdateIn: 'next_update_in',
  /** Approve / Reject in an approver's direct message (the value names incident, execution, audience). */
  approvalApprove: 'approval_approve',
  approvalReject: 'approval_reject',
  /** The execute modal's audience checkboxes: a change re-renders the per-audience preview. */
  executeAudiences: 'execute_audiences',
} as const;

export const CALLBACKS = {
  create: 'incident_create',
  execute: 'incident_execute',
  update: 'incident_update',
  resolve: 'incident_resolve',
  close: 'incident_close',
  apiKeyGenerate: 'api_key_generate',
  correct: 'execution_correct',
  retract: 'execution_retract',
  approvalReject: 'approval_reject',
} as const;

/** What a modal carries from opening to submission (its private_metadata, as JSON). */
export interface ModalContext {
  incident_id?: string;
  /** The channel the command ran in: where a created incident is announced. */
  channel_id?: string;
  /** The execution a correction or retraction acts on. */
  execution_id?: string;
  /** The audience (key) an approval decision is for. */
  audience?: string;
}

export function encodeContext(ctx: ModalContext): string {
  return JSON.stringify(ctx);
}

/** Never trusts the metadata's shape: it comes back from Slack inside a payload a user could forge. */
export function decodeContext(raw: string | undefined): ModalContext {
  try {
    const v: unknown = JSON.parse(raw ?? '{}');
    if (v === null || typeof v !== 'object') return {};
    const o = v as Record<string, unknown>;
    return {
      ...(typeof o.incident_id === 'string' ? { incident_id: o.incident_id } : {}),
      ...(typeof o.channel_id === 'string' ? { channel_id: o.channel_id } : {}),
      ...(typeof o.execution_id === 'string' ? { execution_id: o.execution_id } : {}),
      ...(typeof o.audience === 'string' ? { audience: o.audience } : {}),
    };
  } catch {
    return {};
  }
}
