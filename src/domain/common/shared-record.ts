/**
 * A record shared between callers: one object handed to every request that reads the same stored
 * text (the store's decoded cache, store/decoded-cache.ts). Records are never changed in place
 * (every change makes a new one), and a shared one is frozen, with the arrays and objects it
 * holds, so a change in place throws instead of altering another request's record. Whoever
 * derives something from a record (its JSON on the wire) may keep it per shared record.
 */
export function shareRecord<T extends object>(record: T): T {
  for (const v of Object.values(record)) if (typeof v === 'object' && v !== null) Object.freeze(v);
  return Object.freeze(record);
}

/** Whether `record` is shared (see shareRecord): what is derived from it stays right while it lives. */
export const isShared = (record: object): boolean => Object.isFrozen(record);
