/**
 * The token_version a new subscriber record starts at. Links are checked against the record's
 * version, and an erased record leaves nothing behind; were every record to start at 1, the links
 * of an address's earlier, erased subscription would work again for its next one. Starting at the
 * second of creation (counted from 2025, so it stays short) never repeats a version an earlier
 * record of the same address handed out, since a version only grows while a record lives.
 */
const EPOCH_S = 1_735_689_600; // 2025-01-01T00:00:00Z

export function firstTokenVersion(nowMs: number): number {
  return Math.max(1, Math.floor(nowMs / 1000) - EPOCH_S);
}
