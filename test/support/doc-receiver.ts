import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
export const DEADLINE_MS = 30_000;

/** The js block after `<!-- marker -->` in `docs/<page>`: what a reader copies. */
function blockOf(page: string, marker: string): string {
  const doc = readFileSync(join(ROOT, 'docs', page), 'utf8');
  const m = new RegExp(`<!-- ${marker} -->\\s*\`\`\`js\\n([\\s\\S]*?)\`\`\``).exec(doc);
  if (!m) throw new Error(`docs/${page} has no <!-- ${marker} --> js block`);
  return m[1]!;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export interface DocReceiver {
  /** Where it listens (set once the file's beforeAll has run). */
  readonly url: string;
  /** What it printed so far. */
  readonly stdout: string;
  /** Waits (with a deadline) until it has printed `text`. */
  printed(text: string): Promise<void>;
}

/**
 * A receiver example of the docs, run as written: the js block after `<!-- marker -->` in
 * `docs/<page>` is saved as a file and started with node (WEBHOOK_SECRET and PORT set) before the
 * file's tests, and stopped after them. `inRepo`: the file is saved inside the repository, so the
 * block's package imports resolve as in a reader's project.
 */
export function useDocReceiver(o: { page: string; marker: string; secret: string; inRepo?: boolean }): DocReceiver {
  let child: ChildProcess | undefined;
  let stdout = '';
  let url = '';
  let dir = '';
  beforeAll(async () => {
    const root = o.inRepo ? join(ROOT, 'node_modules', '.cache') : tmpdir();
    mkdirSync(root, { recursive: true });
    dir = mkdtempSync(join(root, `herald-${o.marker}-`));
    const file = join(dir, 'receiver.mjs');
    writeFileSync(file, blockOf(o.page, o.marker));
    const port = await freePort();
    url = `http://127.0.0.1:${port}/herald`;
    child = spawn(process.execPath, [file], {
      env: { ...process.env, WEBHOOK_SECRET: o.secret, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    // Poll until it accepts connections: it prints nothing when it starts listening.
    const until = Date.now() + DEADLINE_MS;
    for (;;) {
      const up = await fetch(url, { method: 'POST', body: '{}' }).then(
        () => true,
        () => false,
      );
      if (up) break;
      if (child.exitCode !== null || Date.now() > until) throw new Error(`the receiver did not start: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  afterAll(() => {
    child?.kill('SIGTERM');
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });
  return {
    get url() {
      return url;
    },
    get stdout() {
      return stdout;
    },
    async printed(text: string) {
      const deadline = Date.now() + DEADLINE_MS;
      while (!stdout.includes(text) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    },
  };
}
