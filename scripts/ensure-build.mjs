// Builds dist/ when it is missing or older than any source file, so that `npm ci` (the `prepare`
// script) and `npm start` / `npm run herald` (`prestart`, `preherald`) always run current
// JavaScript with plain node. The build is `npm run build`'s: tsc (type-check, per-file output)
// then scripts/bundle.mjs (dist/main.js and dist/cli/herald.js as single-file bundles, and the
// CLI's stub dist/cli/main.js). Without TypeScript installed (a production install) it only checks
// that dist/ exists: the bundles need neither tool at run time.
//
// Three layouts (docs/install/bare-metal.md):
// - a release (the `npm pack` tarball): dist/ and no src/; nothing to build, ever.
// - a source checkout with dev dependencies: built here when out of date.
// - a source checkout installed with `npm ci --omit=dev`: nothing can be built. The install
//   (`prepare`) still succeeds, saying so, since failing it helps nobody; `npm start` and
//   `npm run herald` then refuse with the same instructions, as there is no dist/ to run.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, utimesSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const entry = join(root, 'dist', 'main.js');
const stamp = join(root, 'dist', '.tsbuildinfo');
// npm names the script that runs this one: `prepare` (npm ci / npm install), `prestart`, `preherald`.
const during = process.env.npm_lifecycle_event ?? '';

const NO_DIST =
  'herald: dist/ is missing and cannot be built here: this is a source checkout installed without its dev dependencies\n' +
  '(npm ci --omit=dev), and building needs TypeScript and esbuild. Either build it with the dev dependencies:\n' +
  '    npm ci && npm run build && npm prune --omit=dev\n' +
  'or install the release tarball (herald-<version>.tgz, made by `npm pack`) instead of the source checkout.\n' +
  'See docs/install/bare-metal.md.\n';

if (!existsSync(join(root, 'src'))) {
  // A release: it ships dist/ and no sources.
  if (existsSync(entry)) process.exit(0);
  process.stderr.write(
    'herald: this release has no dist/main.js: the package is damaged; install the tarball again.\n',
  );
  process.exit(1);
}

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
const newestSrc = newestSource(join(root, 'src'));
const sources = Math.max(newestSrc, ...configs.filter(existsSync).map((f) => statSync(f).mtimeMs));
if (built >= sources) process.exit(0);

const resolve = createRequire(join(root, 'package.json')).resolve;
let tsc;
try {
  tsc = resolve('typescript/bin/tsc');
} catch {
  if (existsSync(entry)) {
    // Only a changed source file is worth a word: `npm prune` may rewrite package-lock.json.
    if (newestSrc > built)
      process.stderr.write(
        'herald: dist/ is older than the sources and TypeScript is not installed: running dist/ as it is (rebuild with `npm ci && npm run build`).\n',
      );
    process.exit(0);
  }
  process.stderr.write(NO_DIST);
  // The install itself succeeds (there is nothing wrong with it); running Herald is what cannot.
  process.exit(during === 'prepare' ? 0 : 1);
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
