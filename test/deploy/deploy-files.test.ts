import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.js';
import { ROOT } from '../support/child.js';
import { startHerald, type TestHerald } from '../support/herald.js';

/**
 * The deployment files against what the code reads: every variable they set exists in the
 * configuration schema, .env.example lists every variable, and the probes and ports they name
 * are the ones Herald serves. Nothing here can be run on this machine (no registry, no cluster),
 * so the files are checked as data.
 */
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const version = (JSON.parse(read('package.json')) as { version: string }).version;
type Obj = Record<string, unknown>;
const asObj = (v: unknown): Obj => (v !== null && typeof v === 'object' ? (v as Obj) : {});

const k8sFiles = readdirSync(join(ROOT, 'deploy', 'kubernetes')).filter((f) => f.endsWith('.yaml'));
const k8sDocs = k8sFiles.flatMap((f) =>
  parseAllDocuments(read(join('deploy', 'kubernetes', f))).map((d) => {
    expect(d.errors, f).toEqual([]);
    return { file: f, doc: asObj(d.toJSON()) };
  }),
);
const containersOf = (doc: Obj): Obj[] =>
  (asObj(asObj(asObj(doc.spec).template).spec).containers as Obj[] | undefined) ?? [];

describe('deployment files', () => {
  /** `NAME=value` lines of .env.example, commented out (`#NAME=value`) or not. */
  const envExample = () =>
    read('.env.example')
      .split('\n')
      .map((l) => /^(#?)([A-Z_0-9]+)=(.*)$/.exec(l))
      .filter((m) => m !== null)
      .map(([, hash, name, value]) => ({ name: name!, value: value!, active: hash === '' }));

  it('.env.example lists every variable Herald reads, and nothing else', () => {
    expect(
      envExample()
        .map((e) => e.name)
        .sort(),
    ).toEqual([...CONFIG_VARIABLES].sort());
  });

  it('an .env made from .env.example overrides nothing the image, compose or the systemd unit sets', () => {
    // compose's env_file and systemd's EnvironmentFile= win over the image's ENV and the unit's
    // Environment=: an uncommented default there would move HERALD_DATA_DIR off the volume.
    const docker = read('Dockerfile');
    const fromImage = [...docker.matchAll(/^ENV (.+)$/gm)].flatMap((m) =>
      [...m[1]!.matchAll(/([A-Z_0-9]+)=/g)].map((x) => x[1]!),
    );
    const compose = asObj(parseYaml(read('compose.yaml'), { merge: true }));
    const fromCompose = Object.values(asObj(compose.services)).flatMap((s) => Object.keys(asObj(asObj(s).environment)));
    const fromUnit = [...read('deploy/systemd/herald.service').matchAll(/^Environment=([A-Z_0-9]+)=/gm)].map(
      (m) => m[1]!,
    );
    const set = new Set([...fromImage, ...fromCompose, ...fromUnit]);
    expect(set).toContain('HERALD_DATA_DIR');
    const active = envExample()
      .filter((e) => e.active)
      .map((e) => e.name);
    expect(active.filter((name) => set.has(name))).toEqual([]);
    expect(active).toContain('HERALD_SECRET_KEY');
  });

  it('every example value in .env.example is one Herald accepts', () => {
    const examples = envExample().filter((e) => e.value !== '');
    expect(examples.length).toBeGreaterThan(20);
    for (const { name, value } of examples) {
      // REDIS_SENTINELS needs its master name and HERALD_SMTP_URL a From; alone, each Redis way is valid.
      expect(
        () => loadConfig({ REDIS_SENTINEL_NAME: 'herald', HERALD_SMTP_FROM: 'status@example.com', [name]: value }),
        `${name}=${value}`,
      ).not.toThrow();
    }
  });

  it("the README's compose commands make an .env with which every compose service and the systemd unit start as meant", () => {
    // The README's Compose block, run as written in a directory holding .env.example.
    const readme = read('README.md');
    const block = /```sh\n\s*(cp \.env\.example \.env\n[\s\S]*?)```/.exec(readme)?.[1];
    expect(block, 'the Compose block').toBeDefined();
    const commands = block!
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('docker compose'));
    const dir = mkdtempSync(join(tmpdir(), 'herald-compose-env-'));
    try {
      copyFileSync(join(ROOT, '.env.example'), join(dir, '.env.example'));
      execFileSync('bash', ['-euo', 'pipefail', '-c', commands.join('\n')], { cwd: dir });
      const dotenv = Object.fromEntries(
        readFileSync(join(dir, '.env'), 'utf8')
          .split('\n')
          .map((l) => /^([A-Z_0-9]+)=(.*)$/.exec(l))
          .filter((m) => m !== null)
          .map(([, k, v]) => [k!, v!]),
      );
      // Precedence as compose applies it: the image's ENV, then env_file, then environment.
      const imageEnv = Object.fromEntries(
        [...read('Dockerfile').matchAll(/^ENV (.+)$/gm)].flatMap((m) =>
          [...m[1]!.matchAll(/([A-Z_0-9]+)=(\S+)/g)].map((x) => [x[1]!, x[2]!]),
        ),
      );
      const services = asObj(asObj(parseYaml(read('compose.yaml'), { merge: true })).services);
      for (const role of ['api', 'worker'] as const) {
        const env = { ...imageEnv, ...dotenv, ...(asObj(asObj(services[role]).environment) as Record<string, string>) };
        const config = loadConfig(env);
        expect(config.HERALD_ROLE).toBe(role);
        expect(config.HERALD_DATA_DIR).toBe('/data');
        expect(config.REDIS_URL).toBe('redis://redis:6379');
        expect(Buffer.from(config.HERALD_SECRET_KEY ?? '', 'base64')).toHaveLength(32);
      }
      // systemd: EnvironmentFile= overrides Environment=.
      const unitEnv = Object.fromEntries(
        [...read('deploy/systemd/herald.service').matchAll(/^Environment=([A-Z_0-9]+)=(.*)$/gm)].map((m) => [
          m[1]!,
          m[2]!,
        ]),
      );
      expect(loadConfig({ ...unitEnv, ...dotenv }).HERALD_DATA_DIR).toBe('/var/lib/herald');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the configuration page lists every variable', () => {
    const page = read('docs/configuration.md');
    for (const name of CONFIG_VARIABLES) expect(page, name).toContain(`| \`${name}\` |`);
  });

  it('the docs stand alone: no Markdown link leaves the repository', () => {
    const docs = [
      'README.md',
      'SECURITY.md',
      'CHANGELOG.md',
      ...readdirSync(join(ROOT, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    for (const file of docs) expect(read(file).match(/\]\((?:https?:)?\/\/[^)]*\)/g) ?? [], file).toEqual([]);
  });

  it('compose.yaml: api + worker (no HTTP health check) + Redis with AOF and noeviction, a volume, the key from .env', () => {
    const compose = asObj(parseYaml(read('compose.yaml'), { merge: true }));
    const services = asObj(compose.services);
    expect(Object.keys(services).sort()).toEqual(['api', 'redis', 'worker']);
    for (const role of ['api', 'worker']) {
      const s = asObj(services[role]);
      // Built from the checkout and tagged with this release (docs/install/docker.md).
      expect(s.build).toBe('.');
      expect(s.image).toBe(`herald:${version}`);
      const env = asObj(s.environment);
      expect(env.HERALD_ROLE).toBe(role);
      expect(s.env_file).toBe('.env');
      for (const name of Object.keys(env)) expect(CONFIG_VARIABLES, `${role}: ${name}`).toContain(name);
    }
    // The image's HEALTHCHECK probes HTTP, which only the api role serves.
    expect(asObj(services.api).healthcheck).toBeUndefined();
    expect(asObj(asObj(services.worker).healthcheck).disable).toBe(true);
    expect(asObj(services.api).ports).toEqual([`${asObj(asObj(services.api).environment).PORT as string}:3000`]);
    const redis = (asObj(services.redis).command as string[]).join(' ');
    expect(redis).toContain('--appendonly yes');
    expect(redis).toContain('--maxmemory-policy noeviction');
    expect(Object.keys(asObj(compose.volumes))).toEqual(['redis-data']);
  });

  it('Kubernetes: api and worker Deployments, probes on /healthz and /readyz at the served port, PodDisruptionBudgets', () => {
    const kinds = k8sDocs.map(({ doc }) => `${doc.kind as string}/${asObj(doc.metadata).name as string}`).sort();
    // No Secret: `kubectl apply -f deploy/kubernetes/` must never overwrite the real one, made with
    // `kubectl create secret` (docs/install/kubernetes.md; its keys are checked in install-docs.test.ts).
    expect(kinds).toEqual([
      'ConfigMap/herald',
      'Deployment/herald-api',
      'Deployment/herald-worker',
      'PodDisruptionBudget/herald-api',
      'PodDisruptionBudget/herald-worker',
      'Service/herald',
    ]);
    for (const f of readdirSync(join(ROOT, 'deploy', 'kubernetes')))
      expect(/\.(ya?ml|json)$/.test(f) ? read(join('deploy', 'kubernetes', f)) : '', f).not.toMatch(/^kind: Secret$/m);
    const byName = new Map(
      k8sDocs.map(({ doc }) => [`${doc.kind as string}/${asObj(doc.metadata).name as string}`, doc]),
    );
    for (const { doc } of k8sDocs) {
      if (doc.kind === 'ConfigMap')
        for (const name of Object.keys(asObj(doc.data))) expect(CONFIG_VARIABLES, name).toContain(name);
      for (const c of containersOf(doc)) {
        for (const e of (c.env as Obj[] | undefined) ?? []) expect(CONFIG_VARIABLES, String(e.name)).toContain(e.name);
        // A placeholder registry, clearly marked, and this release's tag: never a floating `latest`.
        expect(c.image).toBe(`registry.example.com/herald:${version}`);
        expect((c.envFrom as Obj[]).map((e) => asObj(e.secretRef).name).filter(Boolean)).toEqual(['herald']);
      }
    }
    const api = containersOf(byName.get('Deployment/herald-api')!)[0]!;
    const env = Object.fromEntries(((api.env as Obj[]) ?? []).map((e) => [e.name, e.value]));
    expect(env.HERALD_ROLE).toBe('api');
    const port = (api.ports as Obj[])[0]!;
    expect(String(port.containerPort)).toBe(env.PORT);
    expect(asObj(asObj(api.livenessProbe).httpGet)).toEqual({ path: '/healthz', port: port.name });
    expect(asObj(asObj(api.readinessProbe).httpGet)).toEqual({ path: '/readyz', port: port.name });
    const worker = containersOf(byName.get('Deployment/herald-worker')!)[0]!;
    expect(((worker.env as Obj[]) ?? []).find((e) => e.name === 'HERALD_ROLE')?.value).toBe('worker');
  });

  it('the systemd unit sets only known variables, runs the compiled entry and stops within its budget', () => {
    const unit = read('deploy/systemd/herald.service');
    // NODE_ENV is Node's and its libraries' own, not Herald's.
    const names = [...unit.matchAll(/^Environment=([A-Z_0-9]+)=/gm)].map((m) => m[1]!).filter((n) => n !== 'NODE_ENV');
    expect(names).toContain('HERALD_DATA_DIR');
    for (const name of names) expect(CONFIG_VARIABLES, name).toContain(name);
    expect(unit).toMatch(/^ExecStart=\/usr\/bin\/node dist\/main\.js$/m);
    expect(Number(/^TimeoutStopSec=(\d+)$/m.exec(unit)?.[1])).toBeGreaterThan(10);
  });

  it('the Dockerfile: non-root, production dependencies only, node as the command, HEALTHCHECK on /healthz at PORT', () => {
    const docker = read('Dockerfile');
    expect(docker).toMatch(/^USER node$/m);
    expect(docker).toMatch(/npm ci --omit=dev/);
    expect(docker).toMatch(/^CMD \["node", "dist\/main\.js"\]$/m);
    expect(docker).toMatch(/HEALTHCHECK[\s\S]*\/healthz/);
    expect(docker).toMatch(/^EXPOSE 3000$/m);
    expect(docker).toMatch(/PORT=3000/);
  });
});

describe('the probes the files name are the ones Herald serves', () => {
  let h: TestHerald;
  beforeAll(async () => {
    h = await startHerald();
  });
  afterAll(async () => {
    await h.close();
  });
  it.each(['/healthz', '/readyz'])('%s answers 200 without a key', async (path) => {
    expect((await fetch(`${h.url}${path}`)).status).toBe(200);
  });
});
