import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkCommitMessage, MAX_SUBJECT, messageLines } from '../../scripts/commit-msg.mjs';

const ROOT = join(import.meta.dirname, '..', '..');
const BODY = 'The reminder fired twice after a restart because the schedule was read before the lock.';

describe('the commit-msg check', () => {
  it('accepts a short subject, a blank line and a body', () => {
    expect(checkCommitMessage(`Reminders: take the lock before reading the schedule\n\n${BODY}\n`)).toEqual([]);
  });

  it(`accepts a subject of exactly ${MAX_SUBJECT} characters and refuses ${MAX_SUBJECT + 1}, naming the length`, () => {
    expect(checkCommitMessage(`${'a'.repeat(MAX_SUBJECT)}\n\n${BODY}`)).toEqual([]);
    const problems = checkCommitMessage(`${'a'.repeat(MAX_SUBJECT + 1)}\n\n${BODY}`);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/subject line is 73 characters; keep it at most 72/);
  });

  it('counts characters, not bytes, so a subject with accents or emoji is not refused early', () => {
    expect(checkCommitMessage(`${'é'.repeat(MAX_SUBJECT)}\n\n${BODY}`)).toEqual([]);
  });

  it('refuses a body that starts right under the subject', () => {
    const problems = checkCommitMessage(`Reminders: take the lock first\n${BODY}\n`);
    expect(problems).toEqual(['Leave one blank line between the subject and the body.']);
  });

  it('refuses a commit without a body, saying to explain why', () => {
    const problems = checkCommitMessage('Reminders: take the lock first\n');
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/Add a body .* why/);
  });

  it('does not ask merges or fixup/squash/amend commits for a body', () => {
    for (const subject of [
      "Merge branch 'main' into reminders",
      'Merge pull request #12 from someone/reminders',
      'fixup! Reminders: take the lock first',
      'squash! Reminders: take the lock first',
      'amend! Reminders: take the lock first',
    ]) {
      expect(checkCommitMessage(`${subject}\n`), subject).toEqual([]);
    }
    // Their subject and blank line are still checked.
    expect(checkCommitMessage(`fixup! ${'a'.repeat(80)}\n`)).toHaveLength(1);
    expect(checkCommitMessage(`Merge branch 'x'\nmore\n`)).toEqual([
      'Leave one blank line between the subject and the body.',
    ]);
  });

  it('reports every problem at once', () => {
    expect(checkCommitMessage(`${'a'.repeat(100)}\nbody without a blank line`)).toHaveLength(2);
    expect(checkCommitMessage(`${'a'.repeat(100)}\n`)).toHaveLength(2);
  });

  it('reads the message as git stores it: comments, scissors and surrounding blank lines dropped', () => {
    const edited = [
      '',
      'Reminders: take the lock first   ',
      '# Please enter the commit message for your changes.',
      '',
      BODY,
      '',
      '# ------------------------ >8 ------------------------',
      'diff --git a/x b/x',
      'a line far longer than seventy-two characters that belongs to the diff, not to the message',
    ].join('\n');
    expect(messageLines(edited)).toEqual(['Reminders: take the lock first', '', BODY]);
    expect(checkCommitMessage(edited)).toEqual([]);
    // Only comment lines: the body is missing even if the template looks long.
    expect(checkCommitMessage('Reminders: take the lock first\n\n# a comment\n# another\n')).toHaveLength(1);
    // Windows line endings are the same message.
    expect(checkCommitMessage(`Reminders: take the lock first\r\n\r\n${BODY}\r\n`)).toEqual([]);
  });

  it('leaves an empty message to git, which aborts the commit itself', () => {
    expect(checkCommitMessage('\n# only a comment\n')).toEqual([]);
  });

  it('as a command, exits 1 with the reasons on a bad message and 0 on a good one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-commit-msg-'));
    try {
      const file = join(dir, 'COMMIT_EDITMSG');
      const run = () =>
        spawnSync(process.execPath, [join(ROOT, 'scripts', 'commit-msg.mjs'), file], { encoding: 'utf8' });
      writeFileSync(file, `${'a'.repeat(90)}\n`);
      const bad = run();
      expect(bad.status).toBe(1);
      expect(bad.stderr).toMatch(/refused/);
      expect(bad.stderr).toMatch(/90 characters/);
      expect(bad.stderr).toMatch(/Add a body/);
      writeFileSync(file, `Short subject\n\n${BODY}\n`);
      const good = run();
      expect(good.stderr).toBe('');
      expect(good.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is what the git hook runs, with the message file git passes', () => {
    const hook = readFileSync(join(ROOT, '.githooks', 'commit-msg'), 'utf8');
    expect(hook).toMatch(/^#!\/bin\/sh\n/);
    expect(hook).toMatch(/node "[^"]*scripts\/commit-msg\.mjs" "\$1"/);
  });
});
