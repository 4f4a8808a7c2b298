import { hash } from 'node:crypto';

/**
 * The exact text each record object was read from or written as. Every update is a
 * compare-and-set against the stored text (commit.ts and the delivery script), so sending back
 * the bytes that were read is both cheaper than serialising again (a delivery carries its whole
 * rendered content) and right when the stored form differs from a fresh encoding (an incident
 * stored in an earlier form, store/incident-record.ts). Records are never changed in place
 * (every change returns a new object), so an object's text stays what it was.
 */
const texts = new WeakMap<object, string>();

/** Ties `record` to the text it is stored as; returns it. */
export function rememberText<T extends object>(record: T, text: string): T {
  texts.set(record, text);
  return record;
}

/** What a compare-and-set against `record` expects: its remembered text, else `encode()`. */
export function storedText(record: object, encode: () => string): string {
  return texts.get(record) ?? encode();
}

/**
 * The SHA-1 (hex) of what a compare-and-set against `record` expects (storedText, or its JSON):
 * the delivery scripts compare it with Redis' own SHA-1 of the stored text, so the record as read
 * never crosses the wire again.
 */
export function storedTextSha1(record: object): string {
  return hash(
    'sha1',
    storedText(record, () => JSON.stringify(record)),
    'hex',
  );
}
