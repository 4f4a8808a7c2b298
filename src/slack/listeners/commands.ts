import type { AckFn, App, RespondArguments, SlashCommand } from '@slack/bolt';
import { OPEN_STATUSES } from '../../domain/incident/incident.js';
import { isRedisUnavailable } from '../../domain/common/unavailable.js';
import type { SlackDeps } from '../deps.js';
import { ephemeralMessage } from '../errors.js';
import { openCreateModal, openStepModal, type IncidentStep } from './modals.js';
import { identity, once } from '../once.js';
import { escapedText, type KnownBlock } from '../views/block-kit.js';
import { helpMessage } from '../views/help.js';
import { incidentActions, incidentBlocks, incidentFallbackText } from '../views/incident.js';
import { incidentListMessage } from '../views/incident-list.js';

export const COMMAND = '/incident';

/** `list` shows at most this many open incidents (docs/slack.md). */
export const LIST_LIMIT = 20;

export type ParsedCommand =
  | { kind: 'help' }
  | { kind: 'new'; title: string }
  | { kind: 'list' }
  | { kind: 'show' | IncidentStep; id: string | null }
  | { kind: 'unknown'; word: string };

const WITH_ID = new Set(['show', 'execute', 'update', 'resolve', 'close']);

/** Parses the text after `/incident`. Sub-commands are case-insensitive; the rest is kept as typed. */
export function parseCommand(text: string): ParsedCommand {
  const trimmed = text.trim();
  const [first = '', ...rest] = trimmed.split(/\s+/);
  const word = first.toLowerCase();
  const arg = trimmed.slice(first.length).trim();
  if (word === '' || word === 'help') return { kind: 'help' };
  if (word === 'new' || word === 'declare') return { kind: 'new', title: arg };
  if (word === 'list' || word === 'ls') return { kind: 'list' };
  if (WITH_ID.has(word)) return { kind: word as 'show' | IncidentStep, id: rest[0] ?? null };
  return { kind: 'unknown', word: first };
}

const ephemeral = (text: string, blocks?: KnownBlock[]): RespondArguments => ({
  response_type: 'ephemeral',
  text,
  ...(blocks ? { blocks } : {}),
});

/**
 * `/incident …`. Answers that need no modal come back in the ack itself (ephemeral); modals are
 * opened right after the ack, on the command's trigger. Ids are checked before the ack, so a typo
 * gets a friendly line instead of a modal that cannot work.
 */
export function registerCommands(app: App, deps: SlackDeps): void {
  app.command(COMMAND, async ({ command, ack: rawAck, respond }) => {
    // With Redis unreachable every step below fails fast (bounded commands): the user gets the
    // friendly line in the ack itself, or, once acked, as an ephemeral follow-up.
    let acked = false;
    const ack: typeof rawAck = (arg?: Parameters<typeof rawAck>[0]) => {
      acked = true;
      return rawAck(arg);
    };
    try {
      await handleCommand(command, ack, deps);
    } catch (e) {
      if (!acked) await rawAck(ephemeral(ephemeralMessage(e)));
      else
        await respond(ephemeral(ephemeralMessage(e))).catch((err: unknown) =>
          deps.log.warn({ err }, 'could not tell the user a command failed'),
        );
      if (!isRedisUnavailable(e)) throw e;
    }
  });
}

async function handleCommand(
  command: SlashCommand,
  ack: AckFn<string | RespondArguments>,
  deps: SlackDeps,
): Promise<void> {
  const parsed = parseCommand(command.text ?? '');
  switch (parsed.kind) {
    case 'help': {
      const help = helpMessage(command.command);
      await ack(ephemeral(help.text, help.blocks));
      return;
    }
    case 'unknown':
      await ack(
        ephemeral(
          `I don't know \`${escapedText(parsed.word, 120)}\`. Try \`${command.command} help\` for what I can do.`,
        ),
      );
      return;
    case 'list': {
      const page = await deps.services.incidents.list(
        { status: [...OPEN_STATUSES] },
        { limit: LIST_LIMIT, cursor: null },
      );
      const msg = incidentListMessage(page.data, page.nextCursor !== null);
      await ack(ephemeral(msg.text, msg.blocks));
      return;
    }
    case 'new':
      await ack();
      await once(deps.idempotency, identity('trigger', command.trigger_id), () =>
        openCreateModal(deps, command.trigger_id, {
          ...(parsed.title ? { title: parsed.title } : {}),
          ctx: { channel_id: command.channel_id },
        }),
      );
      return;
    case 'show':
    case 'execute':
    case 'update':
    case 'resolve':
    case 'close': {
      if (parsed.id === null) {
        await ack(
          ephemeral(
            `Which incident? Usage: \`${command.command} ${parsed.kind} <id>\` (ids are in \`${command.command} list\`).`,
          ),
        );
        return;
      }
      let incident;
      try {
        // A step needs an incident that can change: the service answers 404 or incident_closed.
        incident =
          parsed.kind === 'show'
            ? await deps.services.incidents.get(parsed.id)
            : await deps.services.incidents.getWritable(parsed.id);
      } catch (e) {
        await ack(ephemeral(ephemeralMessage(e)));
        return;
      }
      if (parsed.kind === 'show') {
        await ack(
          ephemeral(incidentFallbackText(incident), [...incidentBlocks(incident), ...incidentActions(incident)]),
        );
        return;
      }
      await ack();
      const step = parsed.kind;
      await once(deps.idempotency, identity('trigger', command.trigger_id), () =>
        openStepModal(deps, command.trigger_id, step, incident.id),
      );
      return;
    }
  }
}
