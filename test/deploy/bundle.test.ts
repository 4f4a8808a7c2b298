import { build } from 'esbuild';
import { existsSync, readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { childEnv, ROOT, runEntry } from '../support/child.js';

/**
 * `npm run build` ends with scripts/bundle.mjs: dist/main.js and dist/cli/herald.js are each ONE
 * file with the dependencies inside, because loading ~200 files per start was most of the CLI's
 * run time and of the server's start-up. These checks fail if the build goes back to per-file
 * entry points (tsc's output) or to bundling only our own code.
 */
const ENTRIES = { 'dist/main.js': 'src/main.ts', 'dist/cli/herald.js': 'src/cli/main.ts' } as const;
/**
 * What scripts/bundle.mjs leaves to node_modules at run time: a native addon and optional back
 * ends for both, and for the server Express and its router (bundled, esbuild's keepNames made
 * every request redefine the names of closures the router creates per request). The CLI serves
 * no HTTP: it must not load them.
 */
const EXTERNAL = ['msgpackr-extract', 'pg', '@valkey/valkey-glide'];
const EXTERNAL_OF: Record<keyof typeof ENTRIES, string[]> = {
  'dist/main.js': [...EXTERNAL, 'express', 'router'],
  'dist/cli/herald.js': EXTERNAL,
};

/**
 * What a bundle would load at run time, read by esbuild's own parser (so specifiers inside
 * strings or comments do not count): the files it would pull in (relative imports, static or
 * dynamic, and require calls with a literal path) and the packages it leaves to node_modules.
 */
async function loadsOf(file: string): Promise<{ files: string[]; packages: string[] }> {
  const r = await build({
    entryPoints: [join(ROOT, file)],
    absWorkingDir: ROOT,
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    logLevel: 'silent',
  });
  const inputs = Object.keys(r.metafile.inputs);
  const packages = Object.values(r.metafile.inputs)
    .flatMap((i) => i.imports)
    .filter((i) => i.external && !isBuiltin(i.path))
    .map((i) => i.path);
  return { files: inputs.filter((f) => f !== file), packages: [...new Set(packages)].sort() };
}

describe('the bundled entry points', () => {
  for (const [file, source] of Object.entries(ENTRIES)) {
    it(`${file} is one file: it imports no module of ours, and requires only the externals from node_modules`, async () => {
      expect(existsSync(join(ROOT, file)), `${file}: run npm run build`).toBe(true);
      const { files, packages } = await loadsOf(file);
      expect(files).toEqual([]);
      for (const p of packages)
        expect(EXTERNAL_OF[file as keyof typeof ENTRIES], `${file} leaves ${p} to node_modules`).toContain(p);
      // Its linked source map points back at src/, for `node --enable-source-maps`.
      const text = readFileSync(join(ROOT, file), 'utf8');
      expect(text.trimEnd().endsWith(`//# sourceMappingURL=${file.split('/').pop()!}.map`)).toBe(true);
      const map = JSON.parse(readFileSync(join(ROOT, `${file}.map`), 'utf8')) as { sources: string[] };
      expect(map.sources.map((s) => join(ROOT, file, '..', s))).toContain(join(ROOT, source));
      // Plain ASCII: V8 keeps a script's source in the heap, as UTF-16 when any character is not
      // Latin-1 — one arrow in one comment doubled the server bundle's 8 MB (scripts/bundle.mjs).
      const wide = [...text].findIndex((ch) => ch.charCodeAt(0) > 0x7f);
      expect(
        wide,
        `${file}: a non-ASCII character near ${JSON.stringify(text.slice(Math.max(0, wide - 40), wide + 40))}`,
      ).toBe(-1);
    });
  }

  it('dist/cli/main.js, the herald bin, keeps its #! line, loads only the bundle (with the compile cache on), and runs: --help exits 0', async () => {
    const stub = readFileSync(join(ROOT, 'dist/cli/main.js'), 'utf8');
    expect(stub.startsWith('#!/usr/bin/env node\n')).toBe(true);
    expect(stub).toContain('enableCompileCache?.(');
    const { files, packages } = await loadsOf('dist/cli/main.js');
    expect(files).toEqual(['dist/cli/herald.js']);
    for (const p of packages) expect(EXTERNAL_OF['dist/cli/herald.js']).toContain(p);
    const r = await runEntry('cli', ['--help'], childEnv({}));
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Usage:');
  });
});
