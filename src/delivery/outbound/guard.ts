import { promises as dnsPromises, type LookupAddress, type LookupOptions } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import type { Duplex } from 'node:stream';
import {
  describeAddress,
  isLoopbackName,
  normalizeHost,
  permitsAddress,
  type OutboundAllow,
} from '../../domain/connection/address-policy.js';
import { OutboundError } from './error.js';

/**
 * The outbound guard of docs/explanation/delivery-semantics.md, Outbound safety: the ONE place that decides whether
 * Herald may open a connection to a user-supplied destination — HTTP deliveries, connection tests and SMTP alike.
 *
 * Rules:
 * - every address actually connected to must be public unicast (`permitsAddress` of
 *   domain/connection/address-policy.ts: loopback, private, link-local incl. 169.254.169.254, CGNAT,
 *   unique-local, multicast, reserved… are refused; IPv4-mapped IPv6 is judged as its IPv4),
 *   unless it lies in a CIDR of HERALD_OUTBOUND_ALLOW;
 * - a host NAME listed in HERALD_OUTBOUND_ALLOW skips the address rule (the operator opened it);
 * - `http:` is refused (`https_required`) unless the allow list names the host (or, for a
 *   literal address, covers it) — checked before any lookup;
 * - redirects are never followed (outbound/http.ts).
 *
 * Why it is DNS-rebinding safe: the check is not "resolve, check, then let the client resolve
 * again". The guard IS the resolver of the connection: Node's socket calls `lookup` (below)
 * once per connect and connects to exactly the addresses that lookup hands back, after they were
 * checked in the same callback. A name that answers a public address to a pre-check and a private
 * one a moment later is refused at the second answer, because that is the one connected to.
 * Literal addresses skip Node's lookup, so `createConnection` checks them before opening a socket.
 * When a name resolves to several addresses and any one of them is refused, the whole answer is
 * refused (a mixed answer is what a rebinding attack looks like; it is never a legitimate setup).
 *
 * SMTP (nodemailer) resolves names itself, so for it the guard resolves once and hands back the
 * checked IP to connect to: see `resolveGuardedSmtpHost`.
 */

/** Resolves a host name to every address (the injection point for tests: no real DNS needed). */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

export interface BoundedResolverOptions {
  /**
   * DNS servers (`ip` or `ip:port`, `[v6]:port`); default: the system's (/etc/resolv.conf).
   * HERALD_DNS_SERVERS sets it; tests point it at a local DNS server.
   */
  servers?: readonly string[];
  /** c-ares time-out of one try, in ms (it doubles on each retry). Default 1000. */
  timeoutMs?: number;
  /** c-ares tries per server. Default 2. */
  tries?: number;
  /** Hard deadline for the whole resolution, in ms: outstanding queries are cancelled. Default 4000. */
  deadlineMs?: number;
  /** Once one family answered, how long the other may still take (RFC 8305's resolution delay). Default 50. */
  secondFamilyGraceMs?: number;
}

/** Why a resolution failed: `timeout` (no answer in time) or `not_found` (no such name, no address). */
export class DnsError extends Error {
  constructor(
    readonly reason: 'timeout' | 'not_found' | 'failed',
    message: string,
  ) {
    super(message);
    this.name = 'DnsError';
  }
}

/** RFC 6761 §6.3: `localhost` and names under it are loopback, answered without asking DNS. */
const LOOPBACK_ANSWER: readonly LookupAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

const TIMEOUT_CODES = new Set(['ETIMEOUT', 'ECANCELLED', 'ECONNREFUSED', 'ESERVFAIL']);

/**
 * Resolves user-supplied destinations with c-ares (`resolve4` + `resolve6` over UDP), NOT
 * `dns.lookup`: getaddrinfo runs on libuv's thread pool (4 threads by default), so a handful of
 * names whose resolver drops packets would hold every thread for the system's whole retry cycle
 * and starve every other lookup — and file I/O — behind them. c-ares queries are plain sockets on
 * the event loop, each bounded by its time-out and tries, and the whole resolution by a deadline
 * after which the queries are cancelled.
 *
 * What it does not read: /etc/hosts and NSS (mDNS, LDAP…). A destination is a public name, so
 * DNS is the source of truth; the one exception is `localhost` (and `*.localhost`), which means
 * loopback without asking anyone — refused by the guard unless HERALD_OUTBOUND_ALLOW opens it.
 * A name that only /etc/hosts knows does not resolve (`dns_failure`).
 */
export function createBoundedResolver(opts: BoundedResolverOptions = {}): Resolver {
  const timeout = opts.timeoutMs ?? 1000;
  const tries = opts.tries ?? 2;
  const deadlineMs = opts.deadlineMs ?? 4000;
  const graceMs = opts.secondFamilyGraceMs ?? 50;
  const servers = opts.servers && opts.servers.length > 0 ? [...opts.servers] : null;
  if (servers) new dnsPromises.Resolver().setServers(servers); // fail at start-up on a bad entry, not at the first send

  return (hostname) => {
    const name = normalizeHost(hostname);
    if (isLoopbackName(name)) return Promise.resolve(LOOPBACK_ANSWER.map((a) => ({ ...a })));
    // One c-ares channel per resolution, so a deadline cancels this name's queries and no other's.
    const resolver = new dnsPromises.Resolver({ timeout, tries });
    if (servers) resolver.setServers(servers);
    return new Promise<LookupAddress[]>((resolve, reject) => {
      const found: { 4: string[] | null; 6: string[] | null } = { 4: null, 6: null };
      const errors: NodeJS.ErrnoException[] = [];
      let pending = 2;
      let settled = false;
      let grace: NodeJS.Timeout | undefined;
      const finish = () => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        clearTimeout(grace);
        resolver.cancel();
        const addresses = [
          ...(found[4] ?? []).map((address) => ({ address, family: 4 })),
          ...(found[6] ?? []).map((address) => ({ address, family: 6 })),
        ];
        if (addresses.length > 0) return resolve(addresses);
        if (errors.length > 0 && errors.every((e) => e.code === 'ENOTFOUND' || e.code === 'ENODATA'))
          return reject(new DnsError('not_found', `${name} does not exist in DNS or has no address`));
        if (errors.some((e) => TIMEOUT_CODES.has(e.code ?? '')))
          return reject(new DnsError('timeout', `${name} did not resolve: its DNS did not answer in time`));
        if (errors.length === 0) return reject(new DnsError('not_found', `${name} has no address`));
        return reject(new DnsError('failed', `${name} did not resolve (${errors[0]?.code ?? 'error'})`));
      };
      const deadline = setTimeout(() => {
        if (found[4] !== null || found[6] !== null) return finish();
        settled = true;
        clearTimeout(grace);
        resolver.cancel();
        reject(new DnsError('timeout', `${name} did not resolve within ${deadlineMs} ms (DNS did not answer)`));
      }, deadlineMs);
      const settle = (family: 4 | 6, p: Promise<string[]>) => {
        p.then(
          (list) => {
            found[family] = list;
          },
          (e: unknown) => {
            errors.push(e as NodeJS.ErrnoException);
          },
        ).finally(() => {
          pending -= 1;
          if (pending === 0) return finish();
          // One family has addresses: do not wait the whole deadline for a resolver that drops
          // the other query (AAAA is the usual victim).
          if (found[family] !== null && found[family].length > 0 && grace === undefined)
            grace = setTimeout(finish, graceMs);
        });
      };
      settle(4, resolver.resolve4(name));
      settle(6, resolver.resolve6(name));
    });
  };
}

/** The default resolver: bounded c-ares with the system's servers. */
export const systemResolver: Resolver = createBoundedResolver();

/** Node's `lookup` callback shapes (single address, or all of them when `options.all`). */
type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
export type LookupFunction = (hostname: string, options: LookupOptions, callback: LookupCallback) => void;

export interface OutboundGuardOptions {
  resolver?: Resolver;
}

export class OutboundGuard {
  readonly resolver: Resolver;

  constructor(
    readonly allow: OutboundAllow,
    opts: OutboundGuardOptions = {},
  ) {
    this.resolver = opts.resolver ?? systemResolver;
  }

  /**
   * Parses and checks a destination URL before anything is resolved: absolute `http(s):` only,
   * and `http:` only to hosts the allow list names. Returns the URL; throws OutboundError.
   */
  checkUrl(raw: string | URL): URL {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new OutboundError('invalid_url', 'the destination is not a valid URL');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:')
      throw new OutboundError('invalid_url', `the destination must be an https URL, not ${url.protocol}`);
    const host = normalizeHost(url.hostname);
    if (url.protocol === 'http:' && !this.allow.allows(host)) {
      throw new OutboundError(
        'https_required',
        `plain http to ${host} is not allowed; use https (or list the host in HERALD_OUTBOUND_ALLOW)`,
      );
    }
    return url;
  }

  /** Throws blocked_by_policy unless `ip` may be connected to for `host`. */
  checkAddress(ip: string, host: string): void {
    if (permitsAddress(ip, this.allow)) return;
    const via = normalizeHost(host) === normalizeHost(ip) ? '' : ` (${normalizeHost(host)} resolved to it)`;
    throw new OutboundError(
      'blocked_by_policy',
      `${describeAddress(ip)}${via}; outbound requests go to public addresses only (HERALD_OUTBOUND_ALLOW opens exceptions)`,
    );
  }

  /**
   * Resolves `host` (a name or a literal) and checks every address; resolves to them in resolver
   * order. For pre-flight checks (connection tests) and for clients that resolve themselves
   * (SMTP): connect to one of the returned addresses, never to the name again.
   */
  async resolve(host: string): Promise<LookupAddress[]> {
    const h = normalizeHost(host);
    const family = isIP(h);
    if (family !== 0) {
      this.checkAddress(h, h);
      return [{ address: h, family }];
    }
    let addresses: LookupAddress[];
    try {
      addresses = await this.resolver(h);
    } catch (e) {
      // The resolver's own words say why (time-out vs no such name); others get a plain line.
      throw new OutboundError('dns_failure', e instanceof DnsError ? e.message : `${h} did not resolve`, { cause: e });
    }
    if (addresses.length === 0) throw new OutboundError('dns_failure', `${h} has no address`);
    if (!this.allow.allowsHost(h)) for (const a of addresses) this.checkAddress(a.address, h);
    return addresses;
  }

  /** A Node `lookup` that only ever yields checked addresses (see the class comment). */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.resolve(hostname).then(
      (addresses) => {
        const wanted =
          options.family === 4 || options.family === 6
            ? addresses.filter((a) => a.family === options.family)
            : addresses;
        if (wanted.length === 0)
          return callback(
            new OutboundError('dns_failure', `${normalizeHost(hostname)} has no IPv${String(options.family)} address`),
            '',
          );
        if (options.all) return callback(null, wanted);
        const first = wanted[0]!;
        return callback(null, first.address, first.family);
      },
      (err: unknown) => callback(err as NodeJS.ErrnoException, ''),
    );
  };

  /**
   * Called by the agents for every new socket: literal addresses are checked here (Node does not
   * look them up), names get the guarded lookup. Returns an error to fail the request with.
   */
  prepareConnection(options: http.ClientRequestArgs): OutboundError | null {
    const host = normalizeHost(options.host ?? options.hostname ?? 'localhost');
    if (isIP(host) !== 0) {
      try {
        this.checkAddress(host, host);
      } catch (e) {
        return e as OutboundError;
      }
    }
    options.lookup = this.lookup;
    return null;
  }

  /** Agents whose every connection goes through this guard; idle ones are kept briefly (KEEP_ALIVE_IDLE_MS). */
  readonly httpAgent: http.Agent = new GuardedHttpAgent(this);
  readonly httpsAgent: https.Agent = new GuardedHttpsAgent(this);
}

type CreateCallback = (err: Error | null, stream: Duplex) => void;

/**
 * The guard's check in front of an agent's createConnection: a refusal is reported as the
 * request's 'error' through the callback, and no socket is ever opened.
 */
function guardedConnect(
  guard: OutboundGuard,
  options: http.ClientRequestArgs,
  callback: CreateCallback | undefined,
  connect: () => Duplex | null | undefined,
): Duplex | null | undefined {
  const refused = guard.prepareConnection(options);
  if (refused) {
    callback?.(refused, undefined as unknown as Duplex);
    return undefined;
  }
  return connect();
}

/**
 * How long an idle connection is kept for the next request to the same host:port. Keep-alive
 * spares a fan-out a TCP (and TLS) handshake per message — the receiver's CPU as much as ours —
 * but a reused idle socket that the server has just closed fails as a "reset" that looks
 * ambiguous (a possible duplicate for nothing). So an idle socket is kept for one second only,
 * well under any common server's idle time-out (Node 5 s, nginx 75 s, load balancers 60 s), and
 * Node shortens that further to a server's own `Keep-Alive: timeout=` hint. A socket is only ever
 * reused for the host:port it was opened to, after the guard checked its address.
 */
export const KEEP_ALIVE_IDLE_MS = 1000;
const AGENT_OPTIONS = { keepAlive: true, timeout: KEEP_ALIVE_IDLE_MS } as const;

/** http.Agent that connects only where the guard allows (idle connections: see KEEP_ALIVE_IDLE_MS). */
export class GuardedHttpAgent extends http.Agent {
  constructor(private readonly guard: OutboundGuard) {
    super(AGENT_OPTIONS);
  }

  override createConnection(options: http.ClientRequestArgs, callback?: CreateCallback): Duplex | null | undefined {
    return guardedConnect(this.guard, options, callback, () => super.createConnection(options, callback));
  }
}

/** https.Agent twin of GuardedHttpAgent (the guarded lookup also covers tls.connect). */
export class GuardedHttpsAgent extends https.Agent {
  constructor(private readonly guard: OutboundGuard) {
    super(AGENT_OPTIONS);
  }

  override createConnection(options: http.ClientRequestArgs, callback?: CreateCallback): Duplex | null | undefined {
    return guardedConnect(this.guard, options, callback, () => super.createConnection(options, callback));
  }
}

/** Where nodemailer must connect for a guarded SMTP destination. */
export interface GuardedSmtpTarget {
  /** The checked IP address: pass it as nodemailer's `host`. */
  address: string;
  family: number;
  /** The original host name for TLS (SNI and certificate check): pass it as `tls.servername`.
   *  Null when the destination was a literal address. */
  servername: string | null;
}

/**
 * Resolves an SMTP host ONCE, checks the address against the guard, and returns the IP to
 * connect to. DNS-rebinding safe because the caller connects to that IP — nodemailer does no
 * lookup of its own for a literal `host` — so the address checked is the address connected to.
 * TLS still verifies the certificate against the real name via `tls.servername`:
 *
 * ```ts
 * const t = await resolveGuardedSmtpHost(config.host, allow);
 * nodemailer.createTransport({ host: t.address, port, secure, tls: { servername: t.servername ?? undefined } });
 * ```
 *
 * There is no https rule for SMTP; the connection's `security` setting decides TLS. Throws
 * OutboundError (`blocked_by_policy`, `dns_failure`).
 */
export async function resolveGuardedSmtpHost(
  host: string,
  allow: OutboundAllow,
  opts: OutboundGuardOptions = {},
): Promise<GuardedSmtpTarget> {
  const guard = new OutboundGuard(allow, opts);
  const [first] = await guard.resolve(host);
  const name = normalizeHost(host);
  // resolve() never returns an empty list; the fallback keeps the types honest.
  if (!first) throw new OutboundError('dns_failure', `${name} has no address`);
  return { address: first.address, family: first.family, servername: isIP(name) === 0 ? name : null };
}
