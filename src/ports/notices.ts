/**
 * Where the Slack edge keeps the direct messages it posted to approvers and which thread lines it
 * posted, per (execution, audience), so that notifying again (after a crash, from the sweep, or
 * for the next state) updates those messages instead of posting new ones.
 */

/** A posted chat message: its conversation (the DM's channel id) and timestamp. */
export interface ApprovalMessageRef {
  channel: string;
  ts: string;
}

export interface ApprovalMessageLog {
  /** The DMs posted for this audience's approval, by approver (Slack user id). */
  dms(executionId: string, audience: string): Promise<Map<string, ApprovalMessageRef>>;
  /** Records a posted DM; a DM already recorded for that approver is kept (false). */
  recordDm(executionId: string, audience: string, userId: string, ref: ApprovalMessageRef): Promise<boolean>;
  /** Whether the thread line for `state` was posted. */
  threadLinePosted(executionId: string, audience: string, state: string): Promise<boolean>;
  /** Records that the thread line for `state` was posted. */
  recordThreadLine(executionId: string, audience: string, state: string): Promise<void>;
  /**
   * Runs `work` as the only notifier of this (execution, audience) across processes: the direct
   * notify after a decision and the worker's sweep may both arrive, and must not both post.
   * Waits for another holder (up to `waitMs`), then throws so the caller tries again later.
   */
  exclusively<T>(executionId: string, audience: string, work: () => Promise<T>): Promise<T>;
}
