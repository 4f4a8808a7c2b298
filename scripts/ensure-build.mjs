// Builds dist/ when it is missing or older than any source file, so that `npm ci` (the `prepare`
// script) and `npm start` (`prestart`) always run current JavaScript with plain node. The build
// is `npm run build`'s: tsc (type-check, per-file output) then scripts/bundle.mjs (dist/main.js
// and dist/cli/herald.js as single-file bundles, and the CLI's stub dist/cli/main.js). Without
// TypeScript installed (a production install) it only checks that dist/ exists: the bundles
// need neither tool at run time.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, utimesSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const entry = join(root, 'dist', 'main.js');
const stamp = join(root, 'dist', '.tsbuildinfo');

function newestSource(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestSource(p) : statSync(p).mtimeMs);
  }
  return newest;
}

// The bundle also depends on its own script and on the installed dependencies (package-lock).
const configs = ['tsconfig.json', 'tsconfig.build.json', 'package-lock.json', 'scripts/bundle.mjs'].map((f) =>
  join(root, f),
);
const built = existsSync(entry) && existsSync(stamp) ? statSync(stamp).mtimeMs : 0;
const sources = Math.max(
  newestSource(join(root, 'src')),
  ...configs.filter(existsSync).map((f) => statSync(f).mtimeMs),
);
if (built >= sources) process.exit(0);

const resolve = createRequire(join(root, 'package.json')).resolve;
let tsc;
try {
  tsc = resolve('typescript/bin/tsc');
} catch {
  if (existsSync(entry)) process.exit(0);
  process.stderr.write(
    'herald: dist/ is missing and TypeScript is not installed: run `npm ci` (with dev dependencies) and `npm run build`.\n',
  );
  process.exit(1);
}
try {
  resolve('esbuild');
} catch {
  // Dev dependencies from before the bundle step (say, after a pull without `npm ci`).
  process.stderr.write('herald: dist/ is out of date and esbuild is not installed: run `npm ci`.\n');
  process.exit(1);
}
for (const args of [[tsc, '-p', join(root, 'tsconfig.build.json')], [join(root, 'scripts', 'bundle.mjs')]]) {
  const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
// tsc leaves its build info untouched when nothing changed: mark the check as done. Only after
// the bundle too, so that a failed bundle is retried next time rather than left per-file.
utimesSync(stamp, new Date(), new Date());
