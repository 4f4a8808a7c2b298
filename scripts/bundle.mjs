// Bundles the two entry points, src/main.ts (the server) and src/cli/main.ts (the `herald`
// command), each into ONE ES module with its dependencies inside, written over the per-file
// dist/main.js and dist/cli/main.js that `tsc -p tsconfig.build.json` has just emitted. The CLI's
// bundle is dist/cli/herald.js, loaded by a stub in dist/cli/main.js (see CLI_STUB). The rest of
// tsc's dist/ stays, for anything that imports a compiled module directly.
//
// Why: node spends most of a short run resolving, reading and compiling files. Per-file, the
// CLI loads 218 of them (95 of zod, 45 of ioredis) and the server 864. On a quiet 2-core VM
// `keys list` went from ~0.40 s to ~0.28 s bundled and the server's spawn-to-/readyz from
// ~1.15 s to ~0.83 s; on the same VM busy (medians of 21 interleaved runs) 0.63 s -> 0.42 s and
// 1.59 s -> 1.00 s, with RSS at rest 107 MB -> 99 MB. Bundling only our own modules
// (dependencies left as imports) gained much less: the dependencies are most of the files.
//
// Why esbuild: a single well-kept, widely used tool with no dependencies of its own beyond its
// platform binary, and a dev dependency only: the bundle needs nothing of it at run time, so a
// production install (`npm ci --omit=dev`) runs dist/ as before.
//
//   node scripts/bundle.mjs      (run by `npm run build` after tsc, and by scripts/ensure-build.mjs)
import { build } from 'esbuild';
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Packages that stay `require`d from node_modules at run time instead of being bundled.
 * - msgpackr-extract (optional native addon of msgpackr, used by BullMQ): node-gyp-build looks
 *   for its prebuilt .node file relative to the package's own __dirname.
 * - pg, @valkey/valkey-glide: BullMQ's optional back ends, required only when configured (never
 *   by Herald) and not installed; listed so that the bundle does not depend on esbuild leaving a
 *   require inside a try/catch unresolved.
 * - express, router: the HTTP path of every request. Bundled, `keepNames` (below) wraps each
 *   function the router declares inside its per-request dispatch (`next`, the param and route
 *   loops) in a call that redefines the new closure's `name`: three such calls, and a property
 *   redefinition each, on every request. Loaded as they ship they run unwrapped; they are two
 *   packages of a few files each, so start-up barely notices (docs/performance.md).
 */
const EXTERNAL = ['msgpackr-extract', 'pg', '@valkey/valkey-glide', 'express', 'router'];

/**
 * CommonJS code bundled into an ES module has no `__dirname`/`__filename`: a dependency that
 * reaches for files beside itself at run time cannot be bundled. These are the modules that
 * mention them today, each on a path Herald never takes; the build fails when another appears,
 * so a dependency update cannot break the bundle only at run time.
 */
const DIRNAME_ALLOWED = new Map([
  ['node_modules/ioredis/built/Command.js', 'only with the showFriendlyErrorStack option, which Herald does not set'],
  ['node_modules/bullmq/dist/cjs/classes/worker.js', 'sandboxed (file) processors; Herald passes a function'],
  ['node_modules/bullmq/dist/cjs/postgres/sql-scripts.js', 'in a comment only'],
  ['node_modules/msgpackr/dist/node.cjs', 'only where require is not a function; the banner below provides it'],
  ['node_modules/thread-stream/index.js', 'pino transports (worker threads); Herald logs to a stream, see src/log.ts'],
  ['node_modules/pino/lib/transport.js', 'pino transports, as above'],
  ['node_modules/undici/index.js', 'guarded by `typeof __filename !== "undefined"`'],
]);

/**
 * The CLI's bundle is dist/cli/herald.js; dist/cli/main.js, the `herald` bin, is a stub written
 * below that turns on Node's compile cache before importing it. A script is compiled before any
 * of its code runs, so the bundle cannot turn the cache on for itself.
 */
const ENTRIES = { main: 'src/main.ts', 'cli/herald': 'src/cli/main.ts' };

/**
 * dist/cli/main.js. Every `herald` command is a short process, and compiling its 1 MB bundle was
 * about a fifth of a `keys list` (`--cpu-prof`, Node 24: 60 of 290 ms). With Node's compile cache
 * (module.enableCompileCache, Node 22.1 and later; Node 20 has none and skips it) the second and
 * later runs load V8's code cache instead. It lives in node_modules/.cache/herald beside the
 * install, owned by whoever owns the install, not in a shared temporary directory; where that is
 * read-only, Node runs without the cache. Node checks each entry against the source, so a rebuilt
 * bundle is compiled afresh.
 */
const CLI_STUB = `#!/usr/bin/env node
// The herald command (scripts/bundle.mjs): turns on Node's compile cache, then runs the bundle.
import module from 'node:module';
import { fileURLToPath } from 'node:url';

module.enableCompileCache?.(fileURLToPath(new URL('../../node_modules/.cache/herald', import.meta.url)));
await import('./herald.js');
`;

const result = await build({
  absWorkingDir: root,
  entryPoints: ENTRIES,
  outdir: 'dist',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: EXTERNAL,
  // CommonJS dependencies call require() for node built-ins and the externals above; an ES
  // module has no require of its own. (The entry's `#!/usr/bin/env node` stays the first line.)
  banner: {
    js: "import { createRequire as __heraldCreateRequire } from 'node:module';\nconst require = __heraldCreateRequire(import.meta.url);",
  },
  // dist/main.js.map and dist/cli/herald.js.map: `node --enable-source-maps` maps stack traces
  // back to src/ and node_modules/.
  sourcemap: 'linked',
  // Bundling puts many modules in one scope, so esbuild renames clashing declarations (BullMQ's
  // `DelayedError` became `DelayedError2`). Code reads those names: errors named after their
  // constructor (BullMQ, ioredis, redis-errors) are matched by name (BullMQ's worker,
  // src/domain/common/unavailable.ts), pino logs `err.type`, stack traces show them. Keep them.
  keepNames: true,
  // Whitespace and comments out, names kept: V8 keeps each script's whole source text in the
  // heap, and a bundle with a single non-ASCII character in a comment is kept as UTF-16 — the
  // unminified server bundle cost 18.4 MB of heap that way, this one 6.7 MB (one byte per
  // character), 11 MB less resident at rest. Renaming identifiers (full minify) measured no
  // faster start, and kept names keep stack traces readable; `node --enable-source-maps` maps
  // them back to src/.
  minifyWhitespace: true,
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
  // Written below, once the checks pass: a refused bundle leaves tsc's working entry points.
  write: false,
});

const unexpected = [];
for (const [output, { inputs }] of Object.entries(result.metafile.outputs)) {
  if (!output.endsWith('.js')) continue;
  for (const input of Object.keys(inputs)) {
    if (!input.startsWith('node_modules/') || DIRNAME_ALLOWED.has(input)) continue;
    if (/\b__(?:dirname|filename)\b/.test(readFileSync(join(root, input), 'utf8')))
      unexpected.push(`${output}: ${input}`);
  }
}
if (unexpected.length > 0) {
  process.stderr.write(
    `bundle: these bundled modules use __dirname/__filename, which a bundle does not have:\n  ${unexpected.join('\n  ')}\n` +
      'Check what they do with it: make the package external in scripts/bundle.mjs, or allow it there with the reason.\n',
  );
  process.exit(1);
}
for (const file of result.outputFiles) {
  mkdirSync(dirname(file.path), { recursive: true });
  writeFileSync(file.path, file.contents);
}
writeFileSync(join(root, 'dist', 'cli', 'main.js'), CLI_STUB);
// tsc's map of the per-file entry the stub replaced (the bundle has its own, herald.js.map).
rmSync(join(root, 'dist', 'cli', 'main.js.map'), { force: true });
// The `herald` bin: runnable as ./dist/cli/main.js through its `#!/usr/bin/env node` line.
// (Silent on success, like tsc: `npm start` may rebuild first, and its stdout is the JSON log.)
chmodSync(join(root, 'dist', 'cli', 'main.js'), 0o755);
