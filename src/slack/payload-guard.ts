import { parse as parseQuery } from 'node:querystring';
import { COMMAND } from './listeners/commands.js';
import { ACTIONS, CALLBACKS } from './views/action-ids.js';
import { TEMPLATE_FIELD } from './views/incident-modals.js';

/** What Herald's listeners answer (commands.ts, actions.ts, submissions.ts, template-options.ts). */
const HANDLED_ACTIONS: ReadonlySet<string> = new Set(Object.values(ACTIONS));
const HANDLED_CALLBACKS: ReadonlySet<string> = new Set(Object.values(CALLBACKS));

/**
 * The shape check of a signed Slack request, before Bolt sees it. A valid signature says who
 * sent the bytes, not that they are a payload Herald can act on: `payload=null`, a
 * view_submission without a view, `"actions": null` or a `view.blocks` that is not an array would
 * otherwise reach Bolt's routing and Herald's listeners and fail there as a 500. Pure: raw bytes
 * and the content type in, a verdict out.
 *
 * Verdicts:
 * - `pass`: a payload of a kind Herald listens to, with the parts the listeners read in place;
 * - `ignore`: well-formed, but of a kind Herald has no listener for (answered 200, nothing done:
 *   Bolt would otherwise leave it unanswered for 3 s and then say 404);
 * - `malformed`: not something Slack sends (answered 400, nothing done).
 */
export type PayloadVerdict =
  { verdict: 'pass' } | { verdict: 'ignore'; reason: string } | { verdict: 'malformed'; reason: string };

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
const isString = (v: unknown): v is string => typeof v === 'string';

const malformed = (reason: string): PayloadVerdict => ({ verdict: 'malformed', reason });
const ignore = (reason: string): PayloadVerdict => ({ verdict: 'ignore', reason });
const PASS: PayloadVerdict = { verdict: 'pass' };

export function checkSlackPayload(raw: Buffer, contentType: string | undefined): PayloadVerdict {
  let text: string;
  try {
    text = STRICT_UTF8.decode(raw);
  } catch {
    return malformed('the body is not valid UTF-8');
  }
  const isForm = contentType !== undefined && /^application\/x-www-form-urlencoded\s*(;|$)/i.test(contentType);
  if (!isForm) return checkEvent(parseJson(text));
  const form = parseQuery(text);
  if (form.payload === undefined) return checkCommand(form);
  if (!isString(form.payload)) return malformed('the form has more than one payload field');
  return checkInteraction(parseJson(form.payload));
}

const NOT_JSON = Symbol('not JSON');

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return NOT_JSON;
  }
}

/** Events API (JSON): url_verification, or an event_callback carrying an event with a type. */
function checkEvent(body: unknown): PayloadVerdict {
  if (body === NOT_JSON) return malformed('the body is not JSON');
  if (!isObject(body)) return malformed('the body is not a JSON object');
  if (!isString(body.type)) return malformed('the body has no type');
  if (body.type === 'url_verification')
    return isString(body.challenge) ? PASS : malformed('url_verification without a challenge');
  if (body.type !== 'event_callback') return ignore(`event type ${body.type.slice(0, 40)}`);
  const event = body.event;
  if (!isObject(event) || !isString(event.type)) return malformed('event_callback without an event type');
  if (event.type !== 'app_home_opened') return ignore(`event ${event.type.slice(0, 40)}`);
  return isString(event.user) ? PASS : malformed('app_home_opened without a user');
}

/** Slash commands: a form whose fields the command listener reads are single strings. */
function checkCommand(form: ReturnType<typeof parseQuery>): PayloadVerdict {
  if (form.command === undefined) return malformed('a form with neither a command nor a payload');
  for (const field of ['command', 'user_id', 'channel_id', 'trigger_id'] as const) {
    if (!isString(form[field])) return malformed(`the command has no single ${field}`);
  }
  if (form.text !== undefined && !isString(form.text)) return malformed('the command has more than one text');
  return form.command === COMMAND ? PASS : ignore(`command ${String(form.command).slice(0, 40)}`);
}

function hasUser(p: Obj): boolean {
  return isObject(p.user) && isString(p.user.id);
}

/** A view as listeners read it: an id, a callback id, blocks as an array, state values as objects. */
function viewProblem(view: unknown, needsState: boolean): string | null {
  if (!isObject(view)) return 'no view';
  if (!isString(view.id)) return 'a view without an id';
  if (view.callback_id !== undefined && !isString(view.callback_id)) return 'a view whose callback_id is not a string';
  if (!Array.isArray(view.blocks)) return 'view.blocks is not an array';
  if (view.private_metadata !== undefined && !isString(view.private_metadata))
    return 'view.private_metadata is not a string';
  if (view.state === undefined && !needsState) return null;
  if (!isObject(view.state) || !isObject(view.state.values)) return 'view.state.values is not an object';
  for (const block of Object.values(view.state.values)) {
    if (!isObject(block)) return 'a view.state block is not an object';
    for (const input of Object.values(block)) if (!isObject(input)) return 'a view.state input is not an object';
  }
  return null;
}

/** Interactivity (`payload=` JSON): the kinds Herald listens to, with what their listeners read. */
function checkInteraction(p: unknown): PayloadVerdict {
  if (p === NOT_JSON) return malformed('payload is not JSON');
  if (!isObject(p)) return malformed('payload is not a JSON object');
  if (!isString(p.type)) return malformed('payload has no type');
  if (!hasUser(p)) return malformed('payload has no user id');
  switch (p.type) {
    case 'block_actions': {
      if (!Array.isArray(p.actions) || p.actions.length === 0)
        return malformed('block_actions without an actions array');
      for (const a of p.actions as unknown[]) {
        if (!isObject(a) || !isString(a.action_id)) return malformed('an action without an action_id');
        if (a.value !== undefined && !isString(a.value)) return malformed('an action value that is not a string');
      }
      if (p.view !== undefined && p.view !== null) {
        const problem = viewProblem(p.view, false);
        if (problem) return malformed(problem);
      }
      if (p.container !== undefined && !isObject(p.container)) return malformed('container is not an object');
      if (p.channel !== undefined && p.channel !== null && !(isObject(p.channel) && isString(p.channel.id)))
        return malformed('channel without an id');
      // Bolt routes on the first action; one no listener takes would wait 3 s and then 404.
      const first = (p.actions as Obj[])[0]!;
      return HANDLED_ACTIONS.has(first.action_id as string)
        ? PASS
        : ignore(`action ${String(first.action_id).slice(0, 40)}`);
    }
    case 'view_submission':
    case 'view_closed': {
      const problem = viewProblem(p.view, p.type === 'view_submission');
      if (problem) return malformed(`${p.type}: ${problem}`);
      if (p.type === 'view_closed') return ignore('view_closed');
      const callback = (p.view as Obj).callback_id;
      return isString(callback) && HANDLED_CALLBACKS.has(callback)
        ? PASS
        : ignore(`view callback ${String(callback).slice(0, 40)}`);
    }
    case 'block_suggestion': {
      if (!isString(p.action_id) || !isString(p.block_id) || !isString(p.value))
        return malformed('block_suggestion without action_id, block_id and value');
      if (p.view !== undefined && p.view !== null) {
        const problem = viewProblem(p.view, false);
        if (problem) return malformed(problem);
      }
      return p.block_id === TEMPLATE_FIELD ? PASS : ignore(`suggestion for ${p.block_id.slice(0, 40)}`);
    }
    default:
      return ignore(`interaction type ${p.type.slice(0, 40)}`);
  }
}
