/**
 * Reads a submitted modal's `view.state.values` into plain field values. The payload comes from
 * Slack but a user can forge it, so nothing about its shape is trusted: anything unexpected reads
 * as "not filled in", and the service's zod schema has the last word.
 */

export type FieldValue = string | string[] | null;

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function optionValue(o: unknown): string | null {
  return isRecord(o) && typeof o.value === 'string' ? o.value : null;
}

/** One element's state: text, one selected option, or several (multi-select, checkboxes). */
function elementValue(el: unknown): FieldValue {
  if (!isRecord(el)) return null;
  if ('selected_options' in el) {
    return Array.isArray(el.selected_options)
      ? el.selected_options.map(optionValue).filter((v): v is string => v !== null)
      : [];
  }
  if ('selected_option' in el) return optionValue(el.selected_option);
  if (typeof el.value === 'string') return el.value;
  return null;
}

/** Block id → value of the (single) element in that block. */
export function readViewState(values: unknown): Map<string, FieldValue> {
  const out = new Map<string, FieldValue>();
  if (!isRecord(values)) return out;
  for (const [blockId, actions] of Object.entries(values)) {
    if (!isRecord(actions)) continue;
    const first = Object.values(actions)[0];
    out.set(blockId, elementValue(first));
  }
  return out;
}

/** A text field: the string, or '' when left empty (services say "required" in their own words). */
export function textOf(state: Map<string, FieldValue>, field: string): string {
  const v = state.get(field);
  return typeof v === 'string' ? v : '';
}

/** A text field that may be absent from the modal: undefined then, so a patch leaves it alone. */
export function optionalTextOf(state: Map<string, FieldValue>, field: string): string | undefined {
  if (!state.has(field)) return undefined;
  return textOf(state, field);
}

export function selectedOf(state: Map<string, FieldValue>, field: string): string | undefined {
  const v = state.get(field);
  return typeof v === 'string' ? v : undefined;
}

export function listOf(state: Map<string, FieldValue>, field: string): string[] | undefined {
  const v = state.get(field);
  return Array.isArray(v) ? v : undefined;
}

/** Every `variables.<name>` input, as the `variables` object of an execute request. */
export function variablesOf(state: Map<string, FieldValue>): Record<string, string> {
  const entries: [string, string][] = [];
  for (const [field, v] of state) {
    if (!field.startsWith('variables.')) continue;
    // Blank inputs are left out: the service fills defaults and names what is still missing.
    if (typeof v === 'string' && v.trim() !== '') entries.push([field.slice('variables.'.length), v]);
  }
  // fromEntries makes own properties even for a forged name like `__proto__` (the schema refuses it).
  return Object.fromEntries(entries);
}

/**
 * The `initial_value` of each text input of a submitted view, by block id: what the modal was
 * opened with, so a submission can tell which values the user changed. Read from the view Slack
 * sends back, shape unchecked like the rest.
 */
export function initialValuesOf(blocks: unknown): Map<string, string> {
  const out = new Map<string, string>();
  if (!Array.isArray(blocks)) return out;
  for (const b of blocks) {
    if (!isRecord(b) || b.type !== 'input' || typeof b.block_id !== 'string' || !isRecord(b.element)) continue;
    if (typeof b.element.initial_value === 'string') out.set(b.block_id, b.element.initial_value);
  }
  return out;
}

/**
 * The `variables.<name>` inputs whose value differs from what the modal was opened with: the
 * corrections a user typed. A blank input is left out (the value stays as sent).
 */
export function changedVariablesOf(state: Map<string, FieldValue>, blocks: unknown): Record<string, string> {
  const initial = initialValuesOf(blocks);
  return Object.fromEntries(
    Object.entries(variablesOf(state)).filter(([name, v]) => initial.get(`variables.${name}`) !== v),
  );
}
