import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The docs hold together: every relative link in the top-level Markdown files and docs/** leads
 * to a file that exists, and every `#anchor` to a heading of its target, slugged the way GitHub
 * renders it. Pure file reading, so a moved or renamed page fails here, not in a reader's browser.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const TOP = ['README.md', 'CONTRIBUTING.md', 'SECURITY.md', 'CHANGELOG.md'];

function markdownUnder(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return markdownUnder(path);
    return e.name.endsWith('.md') ? [path] : [];
  });
}
const DOC_PAGES = markdownUnder('docs').sort();
const FILES = [...TOP, ...DOC_PAGES];

/** The text outside fenced code blocks, inline code and HTML comments: links there are not links. */
function prose(markdown: string): string {
  return markdown
    .replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, '')
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(/`[^`\n]*`/g, '');
}

/** GitHub's heading slug: lowercase, punctuation dropped except '-' and '_', each space a '-'. */
export function githubSlug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link keeps its text
    .replace(/`([^`]*)`/g, '$1') // code keeps its text
    .replace(/<[^>]+>/g, '') // inline HTML goes
    .replace(/[*~]/g, ''); // emphasis marks go (an underscore is kept, as GitHub keeps it)
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a page's headings make, with GitHub's -1, -2 … for repeats. */
export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  const withoutCode = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, '');
  for (const m of withoutCode.matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const slug = githubSlug(m[1]!);
    const n = seen.get(slug) ?? 0;
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
    seen.set(slug, n + 1);
  }
  return anchors;
}

/** Inline links and images `[text](target "title")` and reference definitions `[x]: target`. */
export function linksOf(markdown: string): string[] {
  const text = prose(markdown);
  const inline = [...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
  const refs = [...text.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)].map((m) => m[1]!);
  return [...inline, ...refs];
}

/** What is wrong with each relative link of `file` (a repository path); empty when all resolve. */
export function brokenLinks(file: string, read: (path: string) => string | null): string[] {
  const source = read(file);
  if (source === null) return [`${file} does not exist`];
  const problems: string[] = [];
  for (const link of linksOf(source)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // https:, mailto: … : not a file of the repository
    const hash = link.indexOf('#');
    const pathPart = decodeURIComponent(hash === -1 ? link : link.slice(0, hash));
    const anchor = hash === -1 ? null : decodeURIComponent(link.slice(hash + 1));
    const target =
      pathPart === '' ? file : relative(ROOT, resolve(ROOT, pathPart.startsWith('/') ? '.' : dirname(file), pathPart));
    if (pathPart.startsWith('/') || target.startsWith('..')) {
      problems.push(`${link}: leaves the repository or is absolute`);
      continue;
    }
    const targetText = target === file ? source : read(target);
    if (targetText === null) {
      problems.push(`${link}: ${target} does not exist`);
      continue;
    }
    if (anchor !== null) {
      if (!target.endsWith('.md')) problems.push(`${link}: an anchor into ${target}, which is not Markdown`);
      else if (!anchorsOf(targetText).has(anchor)) problems.push(`${link}: ${target} has no heading #${anchor}`);
    }
  }
  return problems;
}

/** A repository file's text; a directory reads as '' (a link to a folder is fine); null when absent. */
function readRepo(path: string): string | null {
  const full = join(ROOT, path);
  if (!existsSync(full)) return null;
  return statSync(full).isDirectory() ? '' : readFileSync(full, 'utf8');
}

describe('documentation links', () => {
  it('finds the pages to check', () => {
    expect(DOC_PAGES).toContain('docs/README.md');
    expect(DOC_PAGES.length).toBeGreaterThan(5);
  });

  it.each(FILES.map((f) => [f]))('%s: every relative link and anchor resolves', (file) => {
    expect(brokenLinks(file, readRepo)).toEqual([]);
  });

  it('README.md and docs/README.md link every page under docs/', () => {
    for (const index of ['README.md', 'docs/README.md']) {
      const targets = new Set(
        linksOf(readRepo(index) ?? '')
          .filter((l) => !/^[a-z][a-z0-9+.-]*:/i.test(l))
          .map((l) => relative(ROOT, resolve(ROOT, dirname(index), l.split('#')[0]!))),
      );
      const unlinked = DOC_PAGES.filter((p) => p !== index && !targets.has(p));
      expect(unlinked, `${index} does not link`).toEqual([]);
    }
  });

  it('every page under docs/ says who it is for in its first paragraph', () => {
    // The install guides and the failover page have their own authors and shape.
    for (const page of DOC_PAGES.filter((p) => !p.startsWith('docs/install/') && !p.startsWith('docs/operations/'))) {
      const firstParagraph = (readRepo(page) ?? '').split('\n\n')[1] ?? '';
      expect(firstParagraph, page).toMatch(/^For /);
    }
  });
});

describe('the link checker itself', () => {
  const pages: Record<string, string> = {
    'docs/a.md': [
      '# Page A',
      '## Set-up: the `herald` CLI',
      '## Repeat',
      '## Repeat',
      '```md',
      '## Not a heading [not a link](nowhere.md)',
      '```',
      'See [b](b.md#whats-new), [me](#set-up-the-herald-cli), [again](#repeat-1), `[code](gone.md)`.',
      'Also [web](https://example.com) and [ref].',
      '[ref]: ../README.md',
    ].join('\n'),
    'docs/b.md': "# B\n\n## What's new?\n",
    'README.md': '# Top\n',
    'docs/broken.md': [
      '[missing file](c.md)',
      '[missing anchor](a.md#nope)',
      '[missing own anchor](#nowhere)',
      '[outside](../../etc/passwd)',
    ].join('\n'),
  };
  const read = (p: string) => pages[p] ?? null;

  it('slugs headings as GitHub does', () => {
    expect(githubSlug("What's new?")).toBe('whats-new');
    expect(githubSlug('Set-up: the `herald` CLI')).toBe('set-up-the-herald-cli');
    expect(githubSlug('Adding a channel_type, **fast**')).toBe('adding-a-channel_type-fast');
    expect(githubSlug('[Failover](operations/failover.md) → Redis')).toBe('failover--redis');
    expect([...anchorsOf(pages['docs/a.md']!)]).toEqual(['page-a', 'set-up-the-herald-cli', 'repeat', 'repeat-1']);
  });

  it('passes links that resolve, skips code and web links', () => {
    expect(brokenLinks('docs/a.md', read)).toEqual([]);
  });

  it('reports a missing file, a missing anchor, and a link out of the repository', () => {
    expect(brokenLinks('docs/broken.md', read)).toEqual([
      'c.md: docs/c.md does not exist',
      'a.md#nope: docs/a.md has no heading #nope',
      '#nowhere: docs/broken.md has no heading #nowhere',
      '../../etc/passwd: leaves the repository or is absolute',
    ]);
  });
});
