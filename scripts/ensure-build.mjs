// Compiles src/ to dist/ when dist/ is missing or older than any source file, so that `npm ci`
// (the `prepare` script) and `npm start` (`prestart`) always run current JavaScript with plain
// node. Without TypeScript installed (a production install) it only checks that dist/ exists.
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

const configs = ['tsconfig.json', 'tsconfig.build.json', 'package-lock.json'].map((f) => join(root, f));
const built = existsSync(entry) && existsSync(stamp) ? statSync(stamp).mtimeMs : 0;
const sources = Math.max(newestSource(join(root, 'src')), ...configs.filter(existsSync).map((f) => statSync(f).mtimeMs));
if (built >= sources) process.exit(0);

let tsc;
try {
  tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
} catch {
  if (existsSync(entry)) process.exit(0);
  process.stderr.write('herald: dist/ is missing and TypeScript is not installed: run `npm ci` (with dev dependencies) and `npm run build`.\n');
  process.exit(1);
}
const r = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
// tsc leaves its build info untouched when nothing changed: mark the check as done either way.
if (r.status === 0) utimesSync(stamp, new Date(), new Date());
process.exit(r.status ?? 1);
