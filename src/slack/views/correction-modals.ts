import { fieldError } from '../../domain/common/errors.js';
import { LIMITS } from '../../domain/common/limits.js';
import { NOTE_MAX } from '../../domain/execution/conversation.js';
import type { Incident } from '../../domain/incident/incident.js';
import { CALLBACKS, encodeContext } from './action-ids.js';
import {
  context,
  fitsInput,
  input,
  modal,
  section,
  SLACK_LIMITS,
  textInput,
  type KnownBlock,
  type ModalView,
} from './block-kit.js';
import { variableField } from './execute-modal.js';
import { incidentLine } from './incident.js';

/**
 * The Correct and Retract modals of an execute's messages (the buttons under the announcement's
 * receipts). Block ids are the fields of the /v1 correct and retract requests (`variables.<name>`,
 * `note`, `reason`), so a refusal's errors[].field lands on its input (slack/errors.ts).
 */

/** The execute being corrected or retracted, as the modals present it. */
export interface CorrectedExecution {
  id: string;
  /** The values it was sent with. */
  variables: Record<string, string>;
  /** How many of its messages were delivered (those are what change). */
  delivered: number;
}

const messages = (n: number): string => `${n} delivered ${n === 1 ? 'message' : 'messages'}`;

/**
 * A variable's input, prefilled with the value the execute was sent with. A value longer than a
 * Slack input holds is not prefilled (a cut copy would replace it): left empty, it stays as sent.
 */
function correctedVariableInput(name: string, value: string): KnownBlock {
  const max = Math.min(LIMITS.variableValue, SLACK_LIMITS.plainTextInput);
  if (!fitsInput(value, max)) {
    const hint = `The value sent is ${value.length.toLocaleString('en-US')} characters, longer than a Slack input holds; leave this empty to keep it, or type a replacement.`;
    return input(variableField(name), name, textInput({ multiline: true, maxLength: max }), { optional: true, hint });
  }
  return input(
    variableField(name),
    name,
    textInput({ initial: value, multiline: value.includes('\n'), maxLength: max }),
    { optional: true },
  );
}

export function correctModal(p: { incident: Incident; execution: CorrectedExecution }): ModalView {
  const e = p.execution;
  const blocks: KnownBlock[] = [
    section(
      `${incidentLine(p.incident)}\nCorrect the ${messages(e.delivered)} of \`${e.id}\`: they are rendered again with the values below and edited in place where the platform allows; elsewhere a "Correction: …" note is posted in the incident's thread.`,
    ),
  ];
  const names = Object.keys(e.variables).slice(0, LIMITS.variables);
  if (names.length === 0) blocks.push(context('This execute had no variables: say below what was wrong.'));
  for (const name of names) blocks.push(correctedVariableInput(name, e.variables[name] ?? ''));
  blocks.push(
    input(
      'note',
      'What was wrong?',
      textInput({ multiline: true, maxLength: NOTE_MAX, placeholder: 'The ETA was 15:00, not 05:00.' }),
      {
        optional: true,
        hint: 'Shown with the correction. Change a value, write a note, or both.',
      },
    ),
  );
  return modal({
    callbackId: CALLBACKS.correct,
    title: 'Correct messages',
    submit: 'Correct',
    privateMetadata: encodeContext({ incident_id: p.incident.id, execution_id: e.id }),
    blocks,
  });
}

/**
 * The inputs each modal here always has, whatever blocks a submission carries: a refusal can land
 * on them even when a payload's `view.blocks` is empty or forged (Slack places errors by the view
 * it showed, not by the copy it sends back).
 */
export const CORRECTION_INPUTS: Readonly<Record<string, readonly string[]>> = {
  [CALLBACKS.correct]: ['note'],
  [CALLBACKS.retract]: ['reason'],
};

/**
 * The correct request of a Correct modal's submission. What changed is judged against the
 * execution as stored (`sent`), never against the `initial_value`s of the blocks in the payload:
 * those are the client's copy, and an empty or altered one would turn every unchanged value into
 * a "change". A submission that changes nothing and says nothing is refused on the note input,
 * as the API refuses a correction with neither variables nor a note.
 */
export function correctionRequestOf(
  typed: Record<string, string>,
  note: string,
  sent: Readonly<Record<string, string>>,
): { variables?: Record<string, string>; note?: string } {
  const changed = Object.fromEntries(
    Object.entries(typed).filter(([name, value]) => !Object.hasOwn(sent, name) || sent[name] !== value),
  );
  const hasNote = note.trim() !== '';
  if (Object.keys(changed).length === 0 && !hasNote) {
    throw fieldError(
      'validation_failed',
      'note',
      'Nothing would change: every value is as sent. Change a value, write what was wrong, or both.',
      'required',
    );
  }
  return { ...(Object.keys(changed).length > 0 ? { variables: changed } : {}), ...(hasNote ? { note } : {}) };
}

/** The retraction's confirmation: what happens, and the reason (required) shown where a message stays. */
export function retractModal(p: { incident: Incident; execution: CorrectedExecution }): ModalView {
  const e = p.execution;
  return modal({
    callbackId: CALLBACKS.retract,
    title: 'Retract messages',
    submit: 'Retract',
    close: 'Keep them',
    privateMetadata: encodeContext({ incident_id: p.incident.id, execution_id: e.id }),
    blocks: [
      // `&lt;` is mrkdwn for a literal `<` (a bare one would start a link or mention).
      section(
        `${incidentLine(p.incident)}\n:warning: Retract the ${messages(e.delivered)} of \`${e.id}\`? Each is deleted where the platform allows; elsewhere "Retracted: &lt;reason&gt;" is posted in the incident's thread. This cannot be undone.`,
      ),
      input(
        'reason',
        'Why are they withdrawn?',
        textInput({ multiline: true, maxLength: NOTE_MAX, placeholder: 'Sent to the wrong audience.' }),
        {
          hint: 'Required. Shown where a message cannot be deleted.',
        },
      ),
    ],
  });
}
