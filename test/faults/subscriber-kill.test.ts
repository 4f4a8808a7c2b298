import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopChild, type Child } from '../support/child.js';
import {
  smtpEnv,
  startCountingSmtp,
  startWorker,
  startWorld,
  type CountingSmtp,
  type World,
} from '../support/subscriber-world.js';
import { waitFor } from '../support/wait.js';

/**
 * Subscriber mail under SIGKILL, process level (docs/subscribers.md, "Exactly once"): 20,000
 * confirmed e-mail subscribers (imported through the admin API), an API-only Herald in this
 * process, and the sending in a worker process (`dist/main.js`, HERALD_ROLE=worker; `npm test`
 * builds it first). One public update is published; the worker is SIGKILLed twice while its mails
 * flow (at about a quarter and at about three fifths of them) and started again each time.
 *
 * At the SMTP server, once the execution's tally says complete: every subscriber got the update
 * under exactly one Message-ID (receivers drop a repeat of it), nobody was skipped, and the raw
 * repeats — a mail the server took whose acceptance the killed worker never recorded — are at
 * most what a worker can have in flight or answered but unrecorded (REPEAT_BOUND_PER_KILL) and no
 * more than the tally admits as possible duplicates.
 */
const N = 20_000;
/** SMTP connections per worker (HERALD_SMTP_POOL). */
const POOL = 4;
/**
 * The most mails a kill can leave accepted by the server but unrecorded: a worker has twice its
 * pool in flight, at most as many answered results wait for their write (RecordQueue's cap), and
 * at most as many are in the write under way.
 */
const REPEAT_BOUND_PER_KILL = 3 * POOL * 2;
/** Mails/s through the relay: a run of several seconds, so the kills land while mails flow. */
const RATE = 2000;
/** Generous for a busy 2-core machine, where a killed worker's leases (60 s) must run out before another takes them. */
const PHASE_DEADLINE_MS = 240_000;

let smtp: CountingSmtp;
let w: World;
const children: Child[] = [];
const emails = Array.from({ length: N }, (_, i) => `u${i}@example.com`);

beforeAll(async () => {
  smtp = await startCountingSmtp();
  w = await startWorld({ env: smtpEnv(smtp, { rate: RATE, pool: POOL }), worker: false, components: ['Database'] });
}, 120_000);

afterAll(async () => {
  for (const c of children) await stopChild(c);
  await w?.close();
  await smtp?.close();
});

async function worker(): Promise<Child> {
  const c = await startWorker(w, smtpEnv(smtp, { rate: RATE, pool: POOL }));
  children.push(c);
  return c;
}

/** Waits until the SMTP server has taken `n` mails, then SIGKILLs the worker; the count at the kill. */
async function killAt(c: Child, n: number, what: string): Promise<number> {
  await waitFor(() => smtp.mails.length >= n, { timeoutMs: PHASE_DEADLINE_MS, intervalMs: 5, what });
  c.proc.kill('SIGKILL');
  await c.exited;
  return smtp.mails.length;
}

describe('subscriber mail across two worker SIGKILLs', () => {
  it('reaches every one of 20,000 subscribers under one Message-ID each', { timeout: 900_000 }, async () => {
    const t0 = Date.now();
    const imported = await w.importEmails(emails);
    expect(imported.created + imported.confirmed, JSON.stringify(imported)).toBe(N);
    expect(imported.skipped).toBe(0);
    const importedMs = Date.now() - t0;

    const first = await worker();
    const inc = await w.incident('Database failover', [w.components.Database!]);
    // Published by the first worker (the status page delivery); its notice goes to every subscriber.
    const exe = await w.publish(inc, 'We are failing the primary database over to the standby.');
    const sendStart = Date.now();

    const atFirstKill = await killAt(first, N * 0.25, 'a quarter of the mails');
    const firstKilled = Date.now();
    const second = await worker();
    const atSecondKill = await killAt(second, N * 0.6, 'three fifths of the mails');
    const secondKilled = Date.now();
    // Both kills landed while mails were still to come.
    expect(atFirstKill).toBeLessThan(N);
    expect(atSecondKill).toBeLessThan(N);
    await worker();
    const tally = await w.subscribersDone(inc, exe, PHASE_DEADLINE_MS * 2);
    const sendMs = Date.now() - sendStart;

    // --- At the SMTP server.
    const notices = new Set(smtp.mails.map((m) => m.notice));
    expect([...notices], 'one notice, named in every mail').toHaveLength(1);
    const notice = [...notices][0]!;
    expect(notice).toMatch(/^ntc_/);
    const idsOf = new Map<string, Set<string>>();
    const raw = new Map<string, number>();
    for (const m of smtp.mails) {
      expect(m.to, 'one recipient per mail').toHaveLength(1);
      expect(m.messageId, 'a Message-ID on every mail').not.toBeNull();
      const id = m.messageId!;
      raw.set(id, (raw.get(id) ?? 0) + 1);
      const to = m.to[0]!;
      const set = idsOf.get(to) ?? new Set<string>();
      set.add(id);
      idsOf.set(to, set);
    }
    const skipped = emails.filter((e) => !idsOf.has(e));
    expect(skipped.length, `subscribers without the mail, e.g. ${skipped.slice(0, 3).join(', ')}`).toBe(0);
    expect(idsOf.size, 'mail only to subscribers').toBe(N);
    const several = [...idsOf.entries()].filter(([, s]) => s.size !== 1);
    expect(several.length, `subscribers with more than one Message-ID: ${JSON.stringify(several.slice(0, 3))}`).toBe(0);
    // The Message-ID is the notice's and the subscriber's: `<ntc_….sub_…@herald>`, distinct per subscriber.
    expect(raw.size).toBe(N);
    for (const id of raw.keys()) expect(id.startsWith(`<${notice}.sub_`) && id.endsWith('@herald>'), id).toBe(true);
    const repeats = smtp.mails.length - raw.size;
    expect(repeats, 'raw repeats within the in-flight bound').toBeLessThanOrEqual(REPEAT_BOUND_PER_KILL * 2);

    // --- The tally agrees.
    expect(tally).toMatchObject({ total: N, delivered: N, failed: 0, bounced: 0, pending: 0, complete: true });
    expect(repeats, 'every raw repeat is admitted as a possible duplicate').toBeLessThanOrEqual(
      tally.possible_duplicates,
    );
    // And the flags stay close to the truth: besides the repeats' causes, only the recipients
    // marked `sending` whose send had not started (at most twice the pool) are flagged.
    expect(tally.possible_duplicates, 'flagged within the bound').toBeLessThanOrEqual(
      2 * (REPEAT_BOUND_PER_KILL + POOL * 2),
    );
    expect(smtp.authFailures).toBe(0);
    // Where the time went: the mails taken between the phases, and the longest pause between two mails.
    const at = smtp.mails.map((m) => m.at).sort((a, b) => a - b);
    let gap = 0;
    let gapAt = 0;
    for (let i = 1; i < at.length; i++)
      if (at[i]! - at[i - 1]! > gap) {
        gap = at[i]! - at[i - 1]!;
        gapAt = i;
      }
    const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    console.info(
      `subscriber-kill timeline: first mail ${secs(at[0]! - sendStart)} after the publish; first kill at ${secs(firstKilled - sendStart)}, ` +
        `second at ${secs(secondKilled - sendStart)}; last mail at ${secs(at[at.length - 1]! - sendStart)}; ` +
        `longest pause between two mails ${secs(gap)} (after mail ${gapAt})`,
    );
    console.info(
      `subscriber-kill: ${N} imported in ${(importedMs / 1000).toFixed(1)} s` +
        (imported.refusedAsTooLarge > 0 ? ` (${imported.refusedAsTooLarge} chunks refused with 413)` : '') +
        `; killed at ${atFirstKill} and ${atSecondKill} mails; complete after ${(sendMs / 1000).toFixed(1)} s; ` +
        `${smtp.mails.length} mails taken, ${repeats} raw repeats, ${tally.possible_duplicates} flagged possible duplicates`,
    );
  });
});
