import { DomainError, isDomainError, type ErrorCode } from '../domain/common/errors.js';
import { escapeSlack } from '../channels/slack/escape.js';
import { isRedisUnavailable } from '../domain/common/unavailable.js';

/**
 * The one table from domain error code to what Slack shows: a friendly ephemeral line,
 * or errors on a modal's inputs. A DomainError's `errors[].field` is a dotted path into the request
 * (`title`, `template_ids.2`, `variables.eta`), and modal block ids are those same paths, so the
 * mapping is by name: the field itself, else its nearest parent (`template_ids.2` → `template_ids`).
 *
 * Codes missing here fall back to the service's own message, which is already written for people.
 */
const FRIENDLY: Partial<Record<ErrorCode, (e: DomainError) => string>> = {
  not_found: (e) => `:mag: ${e.message} Try \`/incident list\` for the open ones.`,
  incident_closed: () => ':lock: That incident is closed; a closed incident cannot change.',
  use_close_endpoint: () => 'Close an incident with `/incident close <id>` or its Close button.',
  missing_variables: (e) =>
    `Some required variables are missing: ${e.errors.map((x) => x.field.replace(/^variables\./, '')).join(', ')}.`,
  // Per audience (errors name each picked audience): the service's message says why each gets nothing.
  no_connections: (e) =>
    e.errors.length > 0
      ? `:electric_plug: ${e.message}`
      : ':electric_plug: There is no enabled connection to deliver to. An admin can add one (POST /v1/connections) and test it from the App Home.',
  unknown_template: () => 'One of the chosen templates no longer exists; pick again.',
  unknown_connection: () => 'One of the chosen connections no longer exists.',
  conflict: () => 'Someone changed this at the same moment; please try again.',
  not_correctable: (e) => `:information_source: ${e.message}`,
  nothing_delivered: () =>
    ':hourglass: None of those messages has been delivered yet, so there is nothing to correct or retract. Try again once the receipts show them delivered.',
  precondition_failed: () => 'Someone changed this at the same moment; please try again.',
  rate_limited: () => ':hourglass: Too many executes right now; try again in a minute.',
  // Approvals: the service's message says which state and who decided; nothing changed.
  not_pending: (e) => `:information_source: ${e.message} Nothing changed.`,
  four_eyes: () =>
    ':no_entry: You asked for this send, and this audience needs a second person to approve it. Ask another approver; nothing changed.',
  not_an_approver: () => ":no_entry: Only this audience's approvers can approve or reject this send. Nothing changed.",
  unknown_audience: (e) => `${e.message} Pick again from the list.`,
  insufficient_scope: () => ':no_entry: Only Herald admins can do that.',
  unauthenticated: () => ':no_entry: Only Herald admins can do that.',
  internal_error: () => ':warning: Something went wrong inside Herald; the error is logged. Please try again.',
  service_unavailable: () => UNAVAILABLE,
};

/** What Slack shows while Redis is down, paused or unreachable. */
export const UNAVAILABLE = ":warning: Herald can't reach its database right now. Please try again in a minute.";

const GENERIC = ':warning: Something went wrong inside Herald; the error is logged. Please try again.';

/**
 * The ephemeral line for any error (non-domain errors never show their internals). It is mrkdwn,
 * and a service's message may quote what the user typed (an id, a name), so those messages are
 * escaped; modal field errors (below) are plain text and are not.
 */
export function ephemeralMessage(err: unknown): string {
  if (isRedisUnavailable(err)) return UNAVAILABLE;
  if (!isDomainError(err)) return GENERIC;
  const shown = new DomainError(
    err.code,
    escapeSlack(err.message),
    err.errors.map((e) => ({ ...e, field: escapeSlack(e.field), message: escapeSlack(e.message) })),
    err.meta,
  );
  const friendly = FRIENDLY[err.code];
  if (friendly) return friendly(shown);
  const details = shown.errors.map((e) => e.message).filter((m) => m !== '' && m !== shown.message);
  return [shown.message, ...details].join(' ');
}

/**
 * `response_action: errors` for a modal whose input blocks are `blockIds`. Field errors land on
 * their input; an error with no field of its own (or one the modal does not show) lands on
 * `fallback`, the modal's first input, so the user always sees why the submission was refused.
 */
export function modalErrors(err: unknown, blockIds: readonly string[], fallback: string): Record<string, string> {
  const out: Record<string, string[]> = {};
  const put = (block: string, message: string) => {
    const list = (out[block] ??= []);
    if (!list.includes(message)) list.push(message);
  };
  if (isRedisUnavailable(err)) {
    put(fallback, UNAVAILABLE);
  } else if (!isDomainError(err)) {
    put(fallback, GENERIC);
  } else {
    const general = FRIENDLY[err.code]?.(err) ?? err.message;
    for (const fe of err.errors) {
      const block = blockFor(fe.field, blockIds);
      if (block) put(block, fe.message);
      else put(fallback, fe.message || general);
    }
    if (err.errors.length === 0) put(fallback, general);
  }
  // Slack shows at most a short line under an input.
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v.join(' ').slice(0, 1000)]));
}

/** The block for a dotted field path: itself, or its nearest parent that the modal has. */
export function blockFor(field: string, blockIds: readonly string[]): string | null {
  let path = field;
  for (;;) {
    if (path !== '' && blockIds.includes(path)) return path;
    const dot = path.lastIndexOf('.');
    if (dot < 0) return null;
    path = path.slice(0, dot);
  }
}
