import { createHmac, randomBytes } from 'node:crypto';
import { checkAnswer, describeViolations, LIMITS } from './slack-limits.js';
import { waitFor } from './wait.js';

/**
 * Plays Slack's side of HTTP mode: signed POSTs to /slack/events exactly as Slack sends them —
 * slash commands as forms, interactivity as a form with one `payload` field, events as JSON —
 * signed with v0 HMAC-SHA256 of `v0:<timestamp>:<body>`.
 */

export interface SlackUser {
  id: string;
  name: string;
}

export interface SlackResponse {
  status: number;
  text: string;
  /** Parsed JSON when the body is JSON, else null. */
  json: any;
  /** How long Herald took to answer (ms). */
  ms: number;
}

export interface SignOptions {
  /** Seconds to add to now for the timestamp (negative = in the past). */
  skewSeconds?: number;
  /** Sign with another secret (forgery). */
  secret?: string;
  /** Send this signature instead of the computed one. */
  signature?: string;
  contentType?: string;
  /** Extra headers, e.g. Slack's `x-slack-retry-num` on a redelivery. */
  headers?: Record<string, string>;
  /** Skip the checks on the answer (a test of a refused or malformed request). */
  unchecked?: boolean;
}

/** Every ack time seen by any client in this test file (ms), for figures and assertions. */
export const ackTimes: number[] = [];

export const TEAM = { id: 'T0HERALD', domain: 'herald-test' };

export function signature(secret: string, timestamp: number, body: string): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
}

export const newTriggerId = (): string =>
  `${Date.now()}.${randomBytes(4).readUInt32BE()}.${randomBytes(8).toString('hex')}`;

export interface SlackClient {
  post(body: string, opts?: SignOptions): Promise<SlackResponse>;
  command(
    text: string,
    opts?: { user?: SlackUser; channel?: string; triggerId?: string; command?: string },
  ): Promise<SlackResponse>;
  /** A button click; `view` is the home or modal it was in (container), else a channel message. */
  click(
    actionId: string,
    value: string,
    opts?: { user?: SlackUser; channel?: string; triggerId?: string; inHome?: boolean; blockId?: string },
  ): Promise<SlackResponse>;
  /**
   * Submits a modal as opened through views.open: `values` fills inputs by block id (text, an
   * option value, or a list for multi-selects and checkboxes); inputs left out keep their
   * initial values, as in Slack.
   */
  submit(
    view: any,
    values?: Record<string, string | string[] | null>,
    opts?: { user?: SlackUser; viewId?: string },
  ): Promise<SlackResponse>;
  event(event: Record<string, unknown>): Promise<SlackResponse>;
  /** What Slack sends as the user types into an external select of an open modal (block_suggestion). */
  suggest(view: any, blockId: string, value: string, opts?: { user?: SlackUser }): Promise<SlackResponse>;
}

export function slackClient(
  baseUrl: string,
  secret: string,
  defaultUser: SlackUser = { id: 'UALICE', name: 'alice' },
): SlackClient {
  const post = async (body: string, opts: SignOptions = {}): Promise<SlackResponse> => {
    const ts = Math.floor(Date.now() / 1000) + (opts.skewSeconds ?? 0);
    const started = performance.now();
    const res = await fetch(`${baseUrl}/slack/events`, {
      method: 'POST',
      headers: {
        'content-type': opts.contentType ?? 'application/x-www-form-urlencoded',
        'x-slack-request-timestamp': String(ts),
        'x-slack-signature': opts.signature ?? signature(opts.secret ?? secret, ts, body),
        ...opts.headers,
      },
      body,
    });
    const text = await res.text();
    let json: any = null;
    try {
      json = text === '' ? null : JSON.parse(text);
    } catch {
      json = null;
    }
    const ms = performance.now() - started;
    // Slack gives up on an answer after 3 s (the user sees an error), and refuses an answer that
    // breaks its limits: either fails the test that caused it, here.
    if (!opts.unchecked && res.status === 200) {
      ackTimes.push(ms);
      if (ms > LIMITS.ackMs)
        throw new Error(
          `Herald answered Slack after ${Math.round(ms)} ms (Slack waits ${LIMITS.ackMs} ms): ${what(body)}`,
        );
      const broken = checkAnswer(what(body), json);
      if (broken.length > 0)
        throw new Error(`Herald answered Slack with a payload Slack refuses:\n${describeViolations(broken)}`);
    }
    return { status: res.status, text, json, ms };
  };

  const interaction = (payload: Record<string, unknown>) =>
    post(new URLSearchParams({ payload: JSON.stringify(payload) }).toString());
  const userOf = (u: SlackUser) => ({ id: u.id, username: u.name, name: u.name, team_id: TEAM.id });

  return {
    post,
    command(text, opts = {}) {
      const user = opts.user ?? defaultUser;
      const form = new URLSearchParams({
        token: 'legacy-verification-token',
        team_id: TEAM.id,
        team_domain: TEAM.domain,
        channel_id: opts.channel ?? 'CGENERAL',
        channel_name: 'general',
        user_id: user.id,
        user_name: user.name,
        command: opts.command ?? '/incident',
        text,
        api_app_id: 'A0HERALD',
        is_enterprise_install: 'false',
        response_url: 'https://hooks.slack.com/commands/T0HERALD/1/abc',
        trigger_id: opts.triggerId ?? newTriggerId(),
      });
      return post(form.toString());
    },
    click(actionId, value, opts = {}) {
      const user = opts.user ?? defaultUser;
      const channel = opts.channel ?? 'CGENERAL';
      const action = {
        type: 'button',
        action_id: actionId,
        block_id: opts.blockId ?? 'b',
        value,
        text: { type: 'plain_text', text: actionId },
        action_ts: `${Date.now() / 1000}`,
      };
      const where = opts.inHome
        ? {
            container: { type: 'view', view_id: 'VHOME' },
            view: { id: 'VHOME', type: 'home', blocks: [], state: { values: {} } },
          }
        : {
            container: { type: 'message', message_ts: '1.1', channel_id: channel, is_ephemeral: false },
            channel: { id: channel, name: 'general' },
            message: { ts: '1.1', text: '' },
          };
      return interaction({
        type: 'block_actions',
        team: TEAM,
        user: userOf(user),
        api_app_id: 'A0HERALD',
        token: 'legacy-verification-token',
        trigger_id: opts.triggerId ?? newTriggerId(),
        response_url: 'https://hooks.slack.com/actions/T0HERALD/1/abc',
        actions: [action],
        ...where,
      });
    },
    submit(view, values = {}, opts = {}) {
      const user = opts.user ?? defaultUser;
      return interaction({
        type: 'view_submission',
        team: TEAM,
        user: userOf(user),
        api_app_id: 'A0HERALD',
        token: 'legacy-verification-token',
        trigger_id: newTriggerId(),
        view: {
          ...view,
          id: opts.viewId ?? view.id ?? 'V0SUBMIT',
          team_id: TEAM.id,
          hash: 'h',
          state: { values: stateOf(view, values) },
        },
        response_urls: [],
      });
    },
    suggest(view, blockId, value, opts = {}) {
      const user = opts.user ?? defaultUser;
      const block = (view.blocks ?? []).find((b: any) => b.block_id === blockId);
      return interaction({
        type: 'block_suggestion',
        user: userOf(user),
        team: TEAM,
        api_app_id: 'A0HERALD',
        token: 'legacy-verification-token',
        container: { type: 'view', view_id: view.id ?? 'V0SUGGEST' },
        view: { ...view, id: view.id ?? 'V0SUGGEST', team_id: TEAM.id, hash: 'h', state: { values: {} } },
        block_id: blockId,
        action_id: block?.element?.action_id ?? 'value',
        value,
      });
    },
    event(event) {
      const body = JSON.stringify({
        token: 'legacy-verification-token',
        team_id: TEAM.id,
        api_app_id: 'A0HERALD',
        event: { event_ts: `${Date.now() / 1000}`, ...event },
        type: 'event_callback',
        event_id: `Ev${randomBytes(6).toString('hex')}`,
        event_time: Math.floor(Date.now() / 1000),
        authorizations: [{ team_id: TEAM.id, user_id: 'U0HERALDBOT', is_bot: true }],
      });
      return post(body, { contentType: 'application/json' });
    },
  };
}

/** Builds `view.state.values` the way Slack does from the view's input blocks. */
export function stateOf(
  view: any,
  values: Record<string, string | string[] | null>,
): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const block of view.blocks ?? []) {
    if (block.type !== 'input') continue;
    const el = block.element;
    const given = Object.hasOwn(values, block.block_id) ? values[block.block_id] : undefined;
    let state: Record<string, unknown>;
    switch (el.type) {
      case 'plain_text_input':
        state = { type: el.type, value: given !== undefined ? given : (el.initial_value ?? null) };
        break;
      case 'static_select': {
        const opt =
          given !== undefined
            ? ((el.options ?? []).find((o: any) => o.value === given) ??
              (given === null ? null : { text: { type: 'plain_text', text: String(given) }, value: given }))
            : (el.initial_option ?? null);
        state = { type: el.type, selected_option: opt };
        break;
      }
      case 'multi_static_select':
      case 'multi_external_select':
      case 'checkboxes': {
        const list =
          given !== undefined
            ? Array.isArray(given)
              ? given
              : given === null
                ? []
                : [given]
            : (el.initial_options ?? []).map((o: any) => o.value);
        state = {
          type: el.type,
          selected_options: list.map(
            (v: string) =>
              (el.options ?? []).find((o: any) => o.value === v) ?? { text: { type: 'plain_text', text: v }, value: v },
          ),
        };
        break;
      }
      default:
        state = { type: el.type };
    }
    out[block.block_id] = { [el.action_id]: state };
  }
  return out;
}

/** Every mrkdwn/plain text in a block list, joined: for asserting what a person would read. */
export function textOfBlocks(blocks: any[] | undefined): string {
  const parts: string[] = [];
  const walk = (v: unknown) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      if (typeof o.text === 'string') parts.push(o.text);
      for (const [k, x] of Object.entries(o)) if (k !== 'text' || typeof x !== 'string') walk(x);
    }
  };
  walk(blocks ?? []);
  return parts.join('\n');
}

/** A short name for a request in error messages: the command text or the interaction type. */
function what(body: string): string {
  const form = new URLSearchParams(body);
  if (form.has('command')) return `${form.get('command')} ${form.get('text') ?? ''}`.trim();
  const payload = form.get('payload');
  if (payload !== null) {
    try {
      const p = JSON.parse(payload) as {
        type?: string;
        view?: { callback_id?: string };
        actions?: { action_id?: string }[];
      };
      return [p.type, p.view?.callback_id, p.actions?.[0]?.action_id].filter(Boolean).join(' ');
    } catch {
      return 'interaction';
    }
  }
  return 'event';
}

/** A fresh Slack view id, as Slack gives each opened modal. */
export const newViewId = (): string => `V${randomBytes(5).toString('hex').toUpperCase()}`;

interface ViewCalls {
  waitForCalls(
    method: string,
    n: number,
    timeoutMs?: number,
  ): Promise<{ args: Record<string, unknown>; viewId?: string }[]>;
  callsTo(method: string): { args: Record<string, unknown>; viewId?: string }[];
}

/** The callback id of Herald's "loading" placeholder (src/slack/listeners/modals.ts). */
export const LOADING_CALLBACK = 'herald_loading';

/**
 * The view a user ends up seeing from one views.open call: Herald opens modals that need data
 * with a loading placeholder and fills them in with views.update on the same view id.
 */
export async function shownView(
  slack: ViewCalls,
  opened: { args: Record<string, unknown>; viewId?: string },
): Promise<any> {
  const view = opened.args.view as { callback_id?: string } | undefined;
  if (view?.callback_id !== LOADING_CALLBACK) return view;
  const id = opened.viewId;
  const update = await waitFor(() => slack.callsTo('views.update').find((c) => c.args.view_id === id), {
    what: `views.update of the loading view ${id}`,
    timeoutMs: 15_000,
  });
  return { ...(update.args.view as object), id };
}

/** The view shown by the (before + 1)-th views.open call at the fake Slack Web API, waited for. */
export async function openedView(slack: ViewCalls, before: number): Promise<any> {
  const calls = await slack.waitForCalls('views.open', before + 1, 15_000);
  return shownView(slack, calls[before]!);
}

/**
 * The newest chat.update of an incident's announcement (the blocks name the incident) whose text
 * satisfies `check`, waited for. Announcement updates are paced, so the deadline is generous.
 */
export async function announcementUpdate(
  slack: ViewCalls,
  incidentId: string,
  check: (text: string, call: { args: Record<string, unknown> }) => boolean,
  timeoutMs = 25_000,
): Promise<any> {
  return waitFor<any>(
    () =>
      slack
        .callsTo('chat.update')
        .filter((c) => JSON.stringify(c.args.blocks ?? []).includes(incidentId))
        .reverse()
        .find((c) => check(textOfBlocks(c.args.blocks as any[]), c)),
    { what: `announcement update of ${incidentId}`, timeoutMs },
  );
}
