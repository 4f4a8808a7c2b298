#!/usr/bin/env node
/**
 * The commit-msg check: `node scripts/commit-msg.mjs <message file>` (git's commit-msg hook in
 * .githooks/ calls it; enable it with `git config core.hooksPath .githooks`).
 *
 * A history is read one subject per line (`git log --oneline`, a PR's commit list, a release's
 * changelog), so the subject is short enough to read there, and the why goes in a body:
 * - the subject (first line) is at most 72 characters;
 * - a blank line separates the subject from the body (git itself treats the first paragraph,
 *   however long, as the subject);
 * - a body is required, except for merges and `fixup!`/`squash!`/`amend!` commits, whose message
 *   git writes or which disappear in an autosquash.
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

export const MAX_SUBJECT = 72;

/** git's scissors line (`commit -v`, `cleanup=scissors`): it and everything below are dropped. */
const SCISSORS = /^# -+ >8 -+$/;

/**
 * The message as git will store it with the default cleanup: comment lines and what follows the
 * scissors dropped, trailing spaces cut, leading and trailing blank lines removed.
 * @param {string} text
 * @returns {string[]}
 */
export function messageLines(text) {
  const lines = [];
  for (const raw of text.replace(/\r\n/g, '\n').split('\n')) {
    if (SCISSORS.test(raw)) break;
    if (raw.startsWith('#')) continue;
    lines.push(raw.replace(/\s+$/, ''));
  }
  while (lines.length > 0 && lines[0] === '') lines.shift();
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/**
 * The problems with a commit message, each a sentence saying what to change; none when it passes.
 * @param {string} text the message file's contents
 * @returns {string[]}
 */
export function checkCommitMessage(text) {
  const lines = messageLines(text);
  const subject = lines[0];
  // An empty message: git aborts the commit itself, with its own explanation.
  if (subject === undefined) return [];
  const problems = [];
  const length = [...subject].length;
  if (length > MAX_SUBJECT) {
    problems.push(
      `The subject line is ${length} characters; keep it at most ${MAX_SUBJECT} ` +
        `(say what changed in short, and put the details in the body).`,
    );
  }
  if (lines.length > 1 && lines[1] !== '') {
    problems.push('Leave one blank line between the subject and the body.');
  }
  const exempt = /^Merge /.test(subject) || /^(fixup|squash|amend)! /.test(subject);
  if (!exempt && lines.length === 1) {
    problems.push('Add a body after a blank line: say why the change is made (what was wrong, why this way).');
  }
  return problems;
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (invokedDirectly) {
  const file = process.argv[2];
  if (file === undefined) {
    process.stderr.write('usage: node scripts/commit-msg.mjs <commit message file>\n');
    process.exit(2);
  }
  const problems = checkCommitMessage(readFileSync(file, 'utf8'));
  if (problems.length > 0) {
    process.stderr.write(
      `commit-msg: the commit message was refused:\n${problems.map((p) => `  - ${p}\n`).join('')}` +
        `Your message is kept in ${file}; edit it and commit again (git commit -e -F ${file}).\n`,
    );
    process.exit(1);
  }
}
