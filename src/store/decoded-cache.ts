import { shareRecord } from '../domain/common/shared-record.js';

/**
 * The records last decoded, by id, with the exact text each came from: reading the same text
 * again returns the same record instead of parsing it again. What is hot is read over and over
 * unchanged — an incident a status page polls, the incident every delivery of an execute reads,
 * the first page of the incident list — and its JSON.parse and copy into the record's shape were
 * a visible share of a read's and a delivery's CPU (docs/performance.md).
 *
 * Always right: the text read from Redis is compared in full, so a record changed by any process
 * decodes anew. The records are shared between callers (domain/common/shared-record.ts: frozen).
 * At most `max` records are kept; the oldest entry goes first.
 */
export class DecodedCache<T extends object> {
  private readonly entries = new Map<string, { text: string; record: T }>();

  constructor(
    private readonly max: number,
    private readonly decode: (text: string, id: string) => T,
  ) {}

  /** The record `text` decodes to, the same object as last time when `id`'s text is unchanged. */
  get(id: string, text: string): T {
    const hit = this.entries.get(id);
    if (hit !== undefined && hit.text === text) return hit.record;
    const record = shareRecord(this.decode(text, id));
    if (hit !== undefined) this.entries.delete(id);
    else if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(id, { text, record });
    return record;
  }
}
