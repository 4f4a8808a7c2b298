import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { CONFIG_VARIABLES } from '../../src/config.js';
import { redisLocation } from '../../src/store/redis-location.js';
import { CHILD_DEADLINE_MS, childEnv, freePort, ROOT, spawnEntry, stopChild, type Child } from '../support/child.js';
import { connectTestRedis, dropPrefix, testRedisUrl, uniquePrefix } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * The install guides' "Create your first API key" commands, run. Docker, kubectl and systemd are
 * not available here, so each command is split in two: the wrapper (`docker compose exec api`,
 * `kubectl exec deploy/herald-api --`, `sudo systemd-run … /usr/bin/node`) is checked against the
 * deployment file it relies on (compose.yaml, deploy/kubernetes/*.yaml, the systemd unit), and
 * the `node dist/cli/main.js keys create …` it runs is run by bash, as written, in the project
 * root (the image's /app, the unit's /opt/herald) with the environment that deployment gives:
 * NODE_ENV=production and the rest from the same files. The printed token must then authenticate
 * against a Herald started with that environment. Only the Redis (the shared test Redis, under a
 * key prefix of its own) and the data directory (a temporary one) differ.
 */
const run = promisify(execFile);
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
type Obj = Record<string, unknown>;
const asObj = (v: unknown): Obj => (v !== null && typeof v === 'object' ? (v as Obj) : {});
const version = (JSON.parse(read('package.json')) as { version: string }).version;
const GUIDES = ['bare-metal', 'docker', 'kubernetes'] as const;

/** The single command of the guide's last section, "Create your first API key" (continuations joined). */
function firstKeyCommand(guide: (typeof GUIDES)[number]): string {
  const md = read(`docs/install/${guide}.md`);
  const parts = md.split(/^## Create your first API key$/m);
  expect(parts, `${guide}.md has one "## Create your first API key" section`).toHaveLength(2);
  const section = parts[1]!;
  expect(section, `${guide}.md: "Create your first API key" is the last section`).not.toMatch(/^## /m);
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  expect(block, `${guide}.md: a sh block in "Create your first API key"`).toBeDefined();
  const lines = block!
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  expect(lines, `${guide}.md: one command`).toHaveLength(1);
  return lines[0]!;
}

/** `<wrapper> [/usr/bin/]node dist/cli/main.js keys create …`: the wrapper's words, the node binary, the CLI part. */
function splitCommand(command: string): { wrapper: string[]; node: string; cli: string } {
  const m = /^(.*?)\s((?:\/\S+\/)?node) (dist\/cli\/main\.js keys create .*)$/.exec(command);
  expect(m, `"${command}" runs node dist/cli/main.js keys create`).not.toBeNull();
  return { wrapper: m![1]!.split(/\s+/), node: m![2]!, cli: m![3]! };
}

/** The image's ENV (the Dockerfile's last stage). */
function imageEnv(): Record<string, string> {
  const runtime = read('Dockerfile')
    .split(/^FROM /m)
    .at(-1)!;
  return Object.fromEntries(
    [...runtime.matchAll(/^ENV (.+)$/gm)].flatMap((m) =>
      [...m[1]!.matchAll(/([A-Z_0-9]+)=(\S+)/g)].map((x) => [x[1]!, x[2]!]),
    ),
  );
}

/** .env / herald.env as the guides make it: .env.example with a fresh HERALD_SECRET_KEY. */
function envFileFromExample(): Record<string, string> {
  const env = Object.fromEntries(
    read('.env.example')
      .split('\n')
      .map((l) => /^([A-Z_0-9]+)=(.*)$/.exec(l))
      .filter((m) => m !== null)
      .map(([, k, v]) => [k!, v!]),
  );
  expect(env).toHaveProperty('HERALD_SECRET_KEY');
  return { ...env, HERALD_SECRET_KEY: randomBytes(32).toString('base64') };
}

const redis = connectTestRedis();
const prefixes: string[] = [];
const dirs: string[] = [];
const servers: Child[] = [];
afterAll(async () => {
  for (const s of servers) await stopChild(s);
  for (const p of prefixes) await dropPrefix(redis, p);
  redis.disconnect();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * What this machine changes in a deployment's environment: the test Redis for REDIS_URL (when
 * the deployment sets one), a key prefix of the test's own, a temporary data directory.
 */
function localized(env: Record<string, string>, withRedisUrl: boolean): Record<string, string> {
  const prefix = uniquePrefix('install');
  prefixes.push(prefix);
  const dataDir = mkdtempSync(join(tmpdir(), 'herald-install-'));
  dirs.push(dataDir);
  const out: Record<string, string> = { ...env, HERALD_KEY_PREFIX: prefix, HERALD_DATA_DIR: dataDir };
  if (withRedisUrl) out.REDIS_URL = testRedisUrl();
  else delete out.REDIS_URL;
  return out;
}

/**
 * Starts Herald with `env`, runs `node <cli>` through bash as the guide writes it, and checks:
 * exit 0, the "using" line first on stderr, and a token that Herald accepts.
 */
async function firstKeyWorks(cli: string, env: Record<string, string>, usingLine: string): Promise<void> {
  expect(env.NODE_ENV).toBe('production');
  const port = await freePort();
  const server = spawnEntry('main', [], childEnv({ ...env, PORT: String(port), HOST: '127.0.0.1' }));
  servers.push(server);
  await waitFor(
    async () => {
      if (server.proc.exitCode !== null) throw new Error(`Herald exited: ${server.stderr()}${server.stdout()}`);
      return (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status === 200;
    },
    { timeoutMs: CHILD_DEADLINE_MS, intervalMs: 100, what: 'Herald, started as the deployment starts it' },
  );
  // No start-up files: this machine's bashrc is not the deployment's.
  const r = await run('bash', ['--norc', '--noprofile', '-eo', 'pipefail', '-c', `node ${cli}`], {
    cwd: ROOT,
    env: childEnv(env),
    timeout: CHILD_DEADLINE_MS,
  });
  expect(r.stderr.split('\n')[0]).toBe(usingLine);
  const token = /\bhld_[0-9A-Za-z]{49}\b/.exec(r.stdout)?.[0];
  expect(token, r.stdout).toBeDefined();
  const res = await fetch(`http://127.0.0.1:${port}/v1/incidents`, { headers: { Authorization: `Bearer ${token}` } });
  expect(res.status).toBe(200);
  await stopChild(server);
}

const usingTestRedis = () => `herald: using Redis ${redisLocation(testRedisUrl())} (REDIS_URL)`;

describe('install guides: the first API key', () => {
  it('every guide stands alone (no link out of the repository) and says what NODE_ENV=production does', () => {
    expect(readdirSync(join(ROOT, 'docs', 'install')).sort()).toEqual(GUIDES.map((g) => `${g}.md`));
    for (const g of GUIDES) {
      const md = read(`docs/install/${g}.md`);
      expect(md.match(/\]\((?:https?:)?\/\/[^)]*\)/g) ?? [], g).toEqual([]);
      expect(md, g).toMatch(/^## NODE_ENV=production$/m);
      expect(md, g).toContain('--embedded');
      // The CLI is named one way everywhere: the package's bin.
      expect(md, g).not.toContain('dist/cli/herald.js');
    }
  });

  it('Compose: `docker compose exec api node dist/cli/main.js keys create …` works with the api service environment', async () => {
    const { wrapper, node, cli } = splitCommand(firstKeyCommand('docker'));
    expect(wrapper.slice(0, 3)).toEqual(['docker', 'compose', 'exec']);
    expect(wrapper).toHaveLength(4);
    expect(node).toBe('node');
    const services = asObj(asObj(parseYaml(read('compose.yaml'), { merge: true })).services);
    const service = asObj(services[wrapper[3]!]);
    // A Herald service built from this Dockerfile, tagged with this version, in the image's /app.
    expect(service.build).toBe('.');
    expect(service.image).toBe(`herald:${version}`);
    expect(service.working_dir).toBeUndefined();
    expect(
      read('Dockerfile')
        .split(/^FROM /m)
        .at(-1),
    ).toMatch(/^WORKDIR \/app$/m);
    expect(read('docs/install/docker.md')).toContain(`docker build -t herald:${version} .`);
    expect(service.env_file).toBe('.env');
    const environment = asObj(service.environment) as Record<string, string>;
    expect(environment.REDIS_URL).toMatch(/^redis:\/\//);
    // Precedence as compose applies it: the image's ENV, then env_file, then environment.
    const env = { ...imageEnv(), ...envFileFromExample(), ...environment };
    await firstKeyWorks(cli, localized(env, true), usingTestRedis());
  });

  it('Kubernetes: `kubectl exec deploy/herald-api -- node dist/cli/main.js keys create …` works with the pod environment', async () => {
    const { wrapper, node, cli } = splitCommand(firstKeyCommand('kubernetes'));
    expect(wrapper).toEqual(['kubectl', 'exec', 'deploy/herald-api', '--']);
    expect(node).toBe('node');
    const docs = readdirSync(join(ROOT, 'deploy', 'kubernetes'))
      .filter((f) => f.endsWith('.yaml'))
      .flatMap((f) => parseAllDocuments(read(`deploy/kubernetes/${f}`)).map((d) => asObj(d.toJSON())));
    const byName = new Map(docs.map((d) => [`${d.kind as string}/${asObj(d.metadata).name as string}`, d]));
    const deployment = byName.get(`Deployment/${wrapper[2]!.replace('deploy/', '')}`);
    expect(deployment).toBeDefined();
    const container = (asObj(asObj(asObj(deployment!.spec).template).spec).containers as Obj[])[0]!;
    // The image's own working directory: the container sets none.
    expect(container.args).toEqual(['node', 'dist/main.js']);
    expect(container.workingDir).toBeUndefined();

    // The Secret, as the guide creates it: its name is the one the pods read, its keys are Herald's.
    const guide = read('docs/install/kubernetes.md').replace(/\\\n\s*/g, ' ');
    const create = /kubectl create secret generic (\S+)(.*)$/m.exec(guide);
    expect(create, 'the kubectl create secret command').not.toBeNull();
    const literals = [...create![2]!.matchAll(/--from-literal=([A-Z_0-9]+)=/g)].map((m) => m[1]!);
    expect(literals.sort()).toEqual(['HERALD_SECRET_KEY', 'REDIS_URL']);
    for (const name of literals) expect(CONFIG_VARIABLES).toContain(name);
    const secretRefs = (container.envFrom as Obj[]).map((e) => asObj(e.secretRef).name).filter(Boolean);
    expect(secretRefs).toEqual([create![1]]);
    const configMaps = (container.envFrom as Obj[]).map((e) => asObj(e.configMapRef).name).filter(Boolean);
    expect(configMaps).toHaveLength(1);
    const configMap = asObj(byName.get(`ConfigMap/${configMaps[0] as string}`)?.data) as Record<string, string>;

    const env = {
      ...imageEnv(),
      ...configMap,
      HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
      REDIS_URL: 'set below',
      ...Object.fromEntries(((container.env as Obj[]) ?? []).map((e) => [String(e.name), String(e.value)])),
    };
    await firstKeyWorks(cli, localized(env, true), usingTestRedis());
  });

  describe('systemd: `sudo systemd-run … /usr/bin/node dist/cli/main.js keys create …`', () => {
    const unit = read('deploy/systemd/herald.service');
    const directive = (name: string) => new RegExp(`^${name}=(.*)$`, 'm').exec(unit)?.[1];
    const unitEnv = Object.fromEntries(
      [...unit.matchAll(/^Environment=([A-Z_0-9]+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]),
    );

    it("runs as the unit's user, in its directory, with its node and exactly its environment", () => {
      const { wrapper, node } = splitCommand(firstKeyCommand('bare-metal'));
      expect(wrapper.slice(0, 2)).toEqual(['sudo', 'systemd-run']);
      for (const flag of ['--pipe', '--wait']) expect(wrapper).toContain(flag);
      expect(wrapper).toContain(`--uid=${directive('User')!}`);
      expect(wrapper).toContain(`--gid=${directive('Group')!}`);
      expect(wrapper).toContain(`--working-directory=${directive('WorkingDirectory')!}`);
      const props = wrapper.flatMap((w, i) => (wrapper[i - 1] === '-p' ? [w] : []));
      expect(props).toEqual([`EnvironmentFile=${directive('EnvironmentFile')!}`]);
      const setenv = wrapper.flatMap((w, i) => (wrapper[i - 1] === '-E' ? [w] : []));
      expect(setenv.sort()).toEqual(
        Object.entries(unitEnv)
          .map(([k, v]) => `${k}=${v}`)
          .sort(),
      );
      expect(node).toBe(directive('ExecStart')!.split(' ')[0]);
      expect(directive('ExecStart')!.split(' ')[1]).toBe('dist/main.js');
    });

    // systemd: EnvironmentFile= overrides Environment=, for the unit as for systemd-run.
    it('works with REDIS_URL uncommented in herald.env', async () => {
      const { cli } = splitCommand(firstKeyCommand('bare-metal'));
      const env = { ...unitEnv, ...envFileFromExample() };
      await firstKeyWorks(cli, localized(env, true), usingTestRedis());
    });

    it("works with herald.env as .env.example leaves it: the running Herald's embedded Redis", async () => {
      const { cli } = splitCommand(firstKeyCommand('bare-metal'));
      const env = localized({ ...unitEnv, ...envFileFromExample() }, false);
      await firstKeyWorks(
        cli,
        env,
        `herald: using the embedded Redis in ${env.HERALD_DATA_DIR!} (of the running Herald)`,
      );
    });
  });
});
