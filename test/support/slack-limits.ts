/**
 * Slack's documented limits, checked on everything Herald sends Slack: every Web API call the
 * fake Web API receives (peers/slack.ts) and every answer to a Slack request (slack-client.ts).
 * Real Slack refuses a payload that breaks one of these (`invalid_blocks`, `invalid_arguments`,
 * `expired_trigger_id`, a modal that never opens), so a test that makes Herald send one fails.
 *
 * Sources (docs.slack.dev): composition objects (text object 1–3,000 characters; option text 75,
 * value 150), block elements (plain_text_input max_length ≤ 3,000 and initial_value within it;
 * button text 75, value 2,000; static/multi selects ≤ 100 options; placeholder 150), blocks
 * (section text 3,000 and ≤ 10 fields of 2,000; header 150; context ≤ 10 elements; input label
 * and hint 2,000; block_id and action_id 255), views (modal title, submit and close 24; ≤ 100
 * blocks; private_metadata 3,000; callback_id 255), messages (≤ 50 blocks; `text` 40,000;
 * `msg_too_long` past about 12,000 characters of block text, as users of bolt-js report),
 * views.open (a trigger_id expires 3 s after the interaction) and the 3 s ack window.
 */
import { hasLoneSurrogate } from '../../src/domain/common/text-cut.js';

export interface Violation {
  /** e.g. `views.open`, `ack /incident list`. */
  where: string;
  /** JSON path, e.g. `view.blocks[3].text.text`. */
  path: string;
  rule: string;
}

/** The Slack error a real Web API would answer with for a violation (the first one found). */
export type SlackRefusal = 'invalid_blocks' | 'invalid_arguments' | 'expired_trigger_id' | 'msg_too_long' | 'no_text';

export const LIMITS = {
  text: 3000,
  optionText: 75,
  optionValue: 150,
  options: 100,
  buttonText: 75,
  buttonValue: 2000,
  plainTextInput: 3000,
  placeholder: 150,
  header: 150,
  sectionFields: 10,
  fieldText: 2000,
  contextElements: 10,
  label: 2000,
  hint: 2000,
  id: 255,
  modalTitle: 24,
  viewBlocks: 100,
  privateMetadata: 3000,
  messageBlocks: 50,
  messageText: 40_000,
  messageBlocksText: 12_000,
  triggerMs: 3000,
  ackMs: 3000,
} as const;

type Json = unknown;
const isObj = (v: Json): v is Record<string, Json> => v !== null && typeof v === 'object' && !Array.isArray(v);

class Checker {
  readonly found: (Violation & { refusal: SlackRefusal })[] = [];
  constructor(private readonly where: string) {}

  add(path: string, rule: string, refusal: SlackRefusal = 'invalid_blocks'): void {
    this.found.push({ where: this.where, path, rule, refusal });
  }

  /** No lone surrogate anywhere: Slack stores Unicode, and half a character is not one. */
  surrogates(v: Json, path: string): void {
    if (typeof v === 'string') {
      if (hasLoneSurrogate(v)) this.add(path, 'holds an unpaired UTF-16 surrogate', 'invalid_arguments');
    } else if (Array.isArray(v)) v.forEach((x, i) => this.surrogates(x, `${path}[${i}]`));
    else if (isObj(v)) for (const [k, x] of Object.entries(v)) this.surrogates(x, path === '' ? k : `${path}.${k}`);
  }

  /** A text object: 1..max characters, not blank. */
  text(v: Json, path: string, max: number = LIMITS.text): void {
    if (v === undefined) return;
    if (!isObj(v) || (v.type !== 'plain_text' && v.type !== 'mrkdwn') || typeof v.text !== 'string') {
      this.add(path, 'is not a text object');
      return;
    }
    if (v.text.trim().length === 0) this.add(`${path}.text`, 'is an empty text object');
    if (v.text.length > max) this.add(`${path}.text`, `is ${v.text.length} characters, over ${max}`);
  }

  plainText(v: Json, path: string, max: number): void {
    this.text(v, path, max);
    if (isObj(v) && v.type !== 'plain_text') this.add(path, 'must be plain_text');
  }

  id(v: Json, path: string): void {
    if (typeof v === 'string' && v.length > LIMITS.id) this.add(path, `is ${v.length} characters, over ${LIMITS.id}`);
  }

  option(o: Json, path: string): void {
    if (!isObj(o)) return this.add(path, 'is not an option');
    this.text(o.text, `${path}.text`, LIMITS.optionText);
    if (typeof o.value !== 'string' || o.value.length > LIMITS.optionValue)
      this.add(`${path}.value`, `must be a string of at most ${LIMITS.optionValue} characters`);
    if (o.description !== undefined) this.text(o.description, `${path}.description`, LIMITS.optionText);
  }

  element(e: Json, path: string): void {
    if (!isObj(e)) return;
    this.id(e.action_id, `${path}.action_id`);
    if (e.placeholder !== undefined) this.plainText(e.placeholder, `${path}.placeholder`, LIMITS.placeholder);
    switch (e.type) {
      case 'button':
        this.plainText(e.text, `${path}.text`, LIMITS.buttonText);
        if (typeof e.value === 'string' && e.value.length > LIMITS.buttonValue)
          this.add(`${path}.value`, `over ${LIMITS.buttonValue} characters`);
        if (isObj(e.confirm)) {
          this.plainText(e.confirm.title, `${path}.confirm.title`, 100);
          this.text(e.confirm.text, `${path}.confirm.text`, 300);
          this.plainText(e.confirm.confirm, `${path}.confirm.confirm`, 30);
          this.plainText(e.confirm.deny, `${path}.confirm.deny`, 30);
        }
        break;
      case 'plain_text_input': {
        const max = typeof e.max_length === 'number' ? e.max_length : LIMITS.plainTextInput;
        if (max > LIMITS.plainTextInput) this.add(`${path}.max_length`, `is ${max}, over ${LIMITS.plainTextInput}`);
        if (typeof e.initial_value === 'string' && e.initial_value.length > Math.min(max, LIMITS.plainTextInput)) {
          this.add(
            `${path}.initial_value`,
            `is ${e.initial_value.length} characters, over the input's max_length ${Math.min(max, LIMITS.plainTextInput)}`,
          );
        }
        break;
      }
      case 'static_select':
      case 'multi_static_select':
      case 'radio_buttons':
      case 'checkboxes':
      case 'overflow': {
        const options = Array.isArray(e.options) ? e.options : [];
        if (options.length > LIMITS.options)
          this.add(`${path}.options`, `has ${options.length} options, over ${LIMITS.options}`);
        if (options.length === 0 && !Array.isArray(e.option_groups)) this.add(`${path}.options`, 'has no options');
        options.forEach((o, i) => this.option(o, `${path}.options[${i}]`));
        break;
      }
      default:
        break;
    }
    if (isObj(e.initial_option)) this.option(e.initial_option, `${path}.initial_option`);
    if (Array.isArray(e.initial_options))
      e.initial_options.forEach((o, i) => this.option(o, `${path}.initial_options[${i}]`));
  }

  block(b: Json, path: string): void {
    if (!isObj(b)) return this.add(path, 'is not a block');
    this.id(b.block_id, `${path}.block_id`);
    switch (b.type) {
      case 'section': {
        if (b.text === undefined && b.fields === undefined) this.add(path, 'a section needs text or fields');
        this.text(b.text, `${path}.text`);
        const fields = Array.isArray(b.fields) ? b.fields : [];
        if (fields.length > LIMITS.sectionFields)
          this.add(`${path}.fields`, `has ${fields.length} fields, over ${LIMITS.sectionFields}`);
        fields.forEach((f, i) => this.text(f, `${path}.fields[${i}]`, LIMITS.fieldText));
        if (b.accessory !== undefined) this.element(b.accessory, `${path}.accessory`);
        break;
      }
      case 'header':
        this.plainText(b.text, `${path}.text`, LIMITS.header);
        break;
      case 'context': {
        const els = Array.isArray(b.elements) ? b.elements : [];
        if (els.length === 0 || els.length > LIMITS.contextElements)
          this.add(`${path}.elements`, `has ${els.length} elements (1..${LIMITS.contextElements})`);
        els.forEach((el, i) => {
          if (isObj(el) && (el.type === 'mrkdwn' || el.type === 'plain_text')) this.text(el, `${path}.elements[${i}]`);
        });
        break;
      }
      case 'actions': {
        const els = Array.isArray(b.elements) ? b.elements : [];
        if (els.length === 0 || els.length > 25) this.add(`${path}.elements`, `has ${els.length} elements (1..25)`);
        els.forEach((el, i) => this.element(el, `${path}.elements[${i}]`));
        break;
      }
      case 'input':
        this.plainText(b.label, `${path}.label`, LIMITS.label);
        if (b.hint !== undefined) this.plainText(b.hint, `${path}.hint`, LIMITS.hint);
        this.element(b.element, `${path}.element`);
        break;
      case 'divider':
        break;
      default:
        break;
    }
  }

  blocks(blocks: Json, path: string, max: number): void {
    if (blocks === undefined) return;
    if (!Array.isArray(blocks)) return this.add(path, 'is not a list of blocks');
    if (blocks.length > max) this.add(path, `has ${blocks.length} blocks, over ${max}`);
    blocks.forEach((b, i) => this.block(b, `${path}[${i}]`));
  }

  view(v: Json, path: string): void {
    if (!isObj(v)) return this.add(path, 'is not a view', 'invalid_arguments');
    this.blocks(v.blocks, `${path}.blocks`, LIMITS.viewBlocks);
    this.id(v.callback_id, `${path}.callback_id`);
    if (typeof v.private_metadata === 'string' && v.private_metadata.length > LIMITS.privateMetadata)
      this.add(`${path}.private_metadata`, `over ${LIMITS.privateMetadata} characters`, 'invalid_arguments');
    if (v.type === 'modal') {
      this.plainText(v.title, `${path}.title`, LIMITS.modalTitle);
      if (v.submit !== undefined) this.plainText(v.submit, `${path}.submit`, LIMITS.modalTitle);
      if (v.close !== undefined) this.plainText(v.close, `${path}.close`, LIMITS.modalTitle);
      const hasInput = Array.isArray(v.blocks) && v.blocks.some((b) => isObj(b) && b.type === 'input');
      if (hasInput && v.submit === undefined) this.add(`${path}.submit`, 'a modal with inputs needs a submit button');
    }
  }

  /** A message: chat.postMessage / chat.update / an ephemeral answer. */
  message(m: Record<string, Json>, path: string): void {
    const text = m.text;
    const blocks = m.blocks;
    const hasBlocks = Array.isArray(blocks) && blocks.length > 0;
    if ((typeof text !== 'string' || text.trim() === '') && !hasBlocks && m.attachments === undefined)
      this.add(`${path}text`, 'a message needs text or blocks', 'no_text');
    if (typeof text === 'string' && text.length > LIMITS.messageText)
      this.add(`${path}text`, `is ${text.length} characters, over ${LIMITS.messageText}`, 'msg_too_long');
    this.blocks(blocks, `${path}blocks`, LIMITS.messageBlocks);
    if (Array.isArray(blocks)) {
      const total = blockTextLength(blocks);
      if (total > LIMITS.messageBlocksText)
        this.add(
          `${path}blocks`,
          `hold ${total} characters of text, over ~${LIMITS.messageBlocksText}`,
          'msg_too_long',
        );
    }
  }
}

/** Every text in a block list, summed (what Slack counts towards `msg_too_long`). */
export function blockTextLength(blocks: Json): number {
  let n = 0;
  const walk = (v: Json): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (isObj(v)) {
      if ((v.type === 'mrkdwn' || v.type === 'plain_text') && typeof v.text === 'string') n += v.text.length;
      else Object.values(v).forEach(walk);
    }
  };
  walk(blocks);
  return n;
}

/**
 * Milliseconds since the interaction behind a trigger id, or null when the id does not carry a
 * time. Slack's trigger ids start with the interaction's time; the test client's start with
 * `Date.now()` in ms (slack-client.ts newTriggerId), which is what this reads.
 */
export function triggerAgeMs(triggerId: unknown, nowMs: number): number | null {
  if (typeof triggerId !== 'string') return null;
  const m = /^(\d{13})\./.exec(triggerId);
  return m ? nowMs - Number(m[1]) : null;
}

/** The violations of one Web API call, each with the error Slack would answer. */
export function checkApiCall(
  method: string,
  args: Record<string, unknown>,
  nowMs: number = Date.now(),
): (Violation & { refusal: SlackRefusal })[] {
  const c = new Checker(method);
  c.surrogates(args, '');
  switch (method) {
    case 'views.open':
    case 'views.push': {
      const age = triggerAgeMs(args.trigger_id, nowMs);
      if (age !== null && age > LIMITS.triggerMs)
        c.add(
          'trigger_id',
          `used ${age} ms after the interaction (valid for ${LIMITS.triggerMs} ms)`,
          'expired_trigger_id',
        );
      c.view(args.view, 'view');
      break;
    }
    case 'views.update':
    case 'views.publish':
      c.view(args.view, 'view');
      break;
    case 'chat.postMessage':
    case 'chat.update':
    case 'chat.postEphemeral':
      c.message(args, '');
      break;
    default:
      break;
  }
  return c.found;
}

/**
 * The violations of one answer to Slack (the HTTP body of an ack): an ephemeral or in-channel
 * message, a `response_action` (update/push with a view, errors), or block_suggestion options.
 */
export function checkAnswer(where: string, json: unknown): Violation[] {
  const c = new Checker(`ack ${where}`);
  if (json === null || json === undefined) return [];
  c.surrogates(json, '');
  if (!isObj(json)) return c.found;
  if (json.response_action === 'update' || json.response_action === 'push') c.view(json.view, 'view');
  else if (json.response_action === 'errors') {
    if (!isObj(json.errors) || Object.keys(json.errors).length === 0)
      c.add('errors', 'errors must name at least one block', 'invalid_arguments');
  } else if (Array.isArray(json.options)) {
    if (json.options.length > LIMITS.options)
      c.add('options', `has ${json.options.length} options, over ${LIMITS.options}`);
    json.options.forEach((o, i) => c.option(o, `options[${i}]`));
  } else if (json.text !== undefined || json.blocks !== undefined) c.message(json, '');
  return c.found.map(({ refusal: _refusal, ...v }) => v);
}

export function describeViolations(vs: readonly Violation[]): string {
  return vs.map((v) => `${v.where}: ${v.path || '(payload)'} ${v.rule}`).join('\n');
}
