import type { types } from '@slack/bolt';
import { escapeSlack } from '../../channels/slack/escape.js';
import { cutText, cutTransformed, nonEmptyText } from '../../domain/common/text-cut.js';

/**
 * The Block Kit vocabulary every view builder uses: Slack's own types plus a few constructors
 * that apply Slack's size limits once (a view Slack rejects is a modal that never opens).
 */
export type KnownBlock = types.KnownBlock;
export type ModalView = types.ModalView;
export type HomeView = types.HomeView;
export type Button = types.Button;
export type PlainTextOption = types.PlainTextOption;
export type InputBlock = types.InputBlock;

/** Slack's documented limits, named once. */
export const SLACK_LIMITS = {
  sectionText: 3000,
  plainTextInput: 3000,
  optionText: 75,
  buttonText: 75,
  modalTitle: 24,
  blocksPerView: 100,
  blocksPerMessage: 50,
  staticOptions: 100,
  messageText: 4000,
  privateMetadata: 3000,
} as const;

/** Cuts `text` to `max` characters on a grapheme boundary, marking the cut with an ellipsis. */
export function truncate(text: string, max: number): string {
  return cutText(text, max);
}

/**
 * A user-supplied value escaped for mrkdwn and cut to `max` characters *after* escaping: escaping
 * can make a value several times longer (`<` → `&lt;`, `*` → U+200B*U+200B), and cutting the
 * escaped text could split an entity. Slack refuses a whole message or view whose section text is
 * over 3,000 characters, so the budget is what is shown, not what was typed. The raw value is cut
 * on a grapheme boundary, so an emoji is never split in half.
 */
export function escapedText(value: string, max: number): string {
  return cutTransformed(value, max, escapeSlack);
}

/** Slack refuses an empty text object (the whole view or message): blank text becomes a dash. */
export const plain = (text: string, max: number = SLACK_LIMITS.sectionText): types.PlainTextElement => ({
  type: 'plain_text',
  text: nonEmptyText(text, max),
  emoji: true,
});

export const mrkdwn = (text: string): types.MrkdwnElement => ({
  type: 'mrkdwn',
  text: nonEmptyText(text, SLACK_LIMITS.sectionText),
});

export const section = (text: string, blockId?: string): types.SectionBlock => ({
  type: 'section',
  text: mrkdwn(text),
  ...(blockId ? { block_id: blockId } : {}),
});

export const context = (text: string): types.ContextBlock => ({ type: 'context', elements: [mrkdwn(text)] });

export const header = (text: string): types.HeaderBlock => ({ type: 'header', text: plain(text, 150) });

export const divider = (): types.DividerBlock => ({ type: 'divider' });

export function button(text: string, actionId: string, value: string, style?: 'primary' | 'danger'): Button {
  return {
    type: 'button',
    text: plain(text, SLACK_LIMITS.buttonText),
    action_id: actionId,
    value,
    ...(style ? { style } : {}),
  };
}

export const option = (text: string, value: string): PlainTextOption => ({
  text: plain(text, SLACK_LIMITS.optionText),
  value,
});

/** The action id of every input element: the block id alone names the field (see slack/errors.ts). */
export const INPUT_ACTION = 'value';

/** An input block whose block id is the request field it fills (`title`, `variables.eta`). */
export function input(
  field: string,
  label: string,
  element: InputBlock['element'],
  opts: { optional?: boolean; hint?: string } = {},
): InputBlock {
  return {
    type: 'input',
    block_id: field,
    label: plain(label, 2000),
    element,
    optional: opts.optional ?? false,
    ...(opts.hint ? { hint: plain(opts.hint, 2000) } : {}),
  };
}

export function textInput(
  opts: { initial?: string | null; multiline?: boolean; maxLength?: number; placeholder?: string } = {},
): types.PlainTextInput {
  const max = Math.min(opts.maxLength ?? SLACK_LIMITS.plainTextInput, SLACK_LIMITS.plainTextInput);
  return {
    type: 'plain_text_input',
    action_id: INPUT_ACTION,
    multiline: opts.multiline ?? false,
    max_length: max,
    // Never a shortened copy: a cut value submitted unchanged would replace the stored one.
    // Callers check fitsInput() first and explain the longer value instead (see incident-modals).
    ...(opts.initial && fitsInput(opts.initial, max) ? { initial_value: opts.initial } : {}),
    ...(opts.placeholder ? { placeholder: plain(opts.placeholder, 150) } : {}),
  };
}

/** Whether a stored value can be prefilled into a text input of `maxLength` as it is. */
export function fitsInput(value: string, maxLength: number = SLACK_LIMITS.plainTextInput): boolean {
  return value.length <= Math.min(maxLength, SLACK_LIMITS.plainTextInput);
}

/** Modal titles are at most 24 characters; the submit/close labels likewise. */
export function modal(p: {
  callbackId: string;
  title: string;
  submit?: string;
  close?: string;
  blocks: KnownBlock[];
  privateMetadata?: string;
}): ModalView {
  return {
    type: 'modal',
    callback_id: p.callbackId,
    title: plain(p.title, SLACK_LIMITS.modalTitle),
    ...(p.submit ? { submit: plain(p.submit, SLACK_LIMITS.modalTitle) } : {}),
    close: plain(p.close ?? 'Cancel', SLACK_LIMITS.modalTitle),
    blocks: p.blocks.slice(0, SLACK_LIMITS.blocksPerView),
    ...(p.privateMetadata !== undefined ? { private_metadata: p.privateMetadata } : {}),
  };
}
