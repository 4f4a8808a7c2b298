import { promises as dnsPromises, type LookupAddress, type LookupOptions } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import type { Duplex } from 'node:stream';
import { describeAddress, normalizeHost, permitsAddress, type OutboundAllow } from '../domain/address-policy.js';
import { OutboundError } from './outbound-error.js';

/**
 * The outbound guard of SPEC §5: the ONE place that decides whether Herald may open a connection
 * to a user-supplied destination — HTTP deliveries, connection tests and SMTP alike.
 *
 * Rules:
 * - every address actually connected to must be public unicast (`permitsAddress` of
 *   domain/address-policy.ts: loopback, private, link-local incl. 169.254.169.254, CGNAT,
 *   unique-local, multicast, reserved… are refused; IPv4-mapped IPv6 is judged as its IPv4),
 *   unless it lies in a CIDR of HERALD_OUTBOUND_ALLOW;
 * - a host NAME listed in HERALD_OUTBOUND_ALLOW skips the address rule (the operator opened it);
 * - `http:` is refused (`https_required`) unless the allow list names the host (or, for a
 *   literal address, covers it) — checked before any lookup;
 * - redirects are never followed (outbound-http.ts).
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

export const systemResolver: Resolver = (hostname) => dnsPromises.lookup(hostname, { all: true, order: 'verbatim' });

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
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new OutboundError('invalid_url', `the destination must be an https URL, not ${url.protocol}`);
    const host = normalizeHost(url.hostname);
    if (url.protocol === 'http:' && !this.allow.allows(host)) {
      throw new OutboundError('https_required', `plain http to ${host} is not allowed; use https (or list the host in HERALD_OUTBOUND_ALLOW)`);
    }
    return url;
  }

  /** Throws blocked_by_policy unless `ip` may be connected to for `host`. */
  checkAddress(ip: string, host: string): void {
    if (permitsAddress(ip, this.allow)) return;
    const via = normalizeHost(host) === normalizeHost(ip) ? '' : ` (${normalizeHost(host)} resolved to it)`;
    throw new OutboundError('blocked_by_policy', `${describeAddress(ip)}${via}; outbound requests go to public addresses only (HERALD_OUTBOUND_ALLOW opens exceptions)`);
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
      throw new OutboundError('dns_failure', `${h} did not resolve`, { cause: e });
    }
    if (addresses.length === 0) throw new OutboundError('dns_failure', `${h} has no address`);
    if (!this.allow.allowsHost(h)) for (const a of addresses) this.checkAddress(a.address, h);
    return addresses;
  }

  /** A Node `lookup` that only ever yields checked addresses (see the class comment). */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.resolve(hostname).then(
      (addresses) => {
        const wanted = options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
        if (wanted.length === 0) return callback(new OutboundError('dns_failure', `${normalizeHost(hostname)} has no IPv${String(options.family)} address`), '');
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

  /** Agents whose every connection goes through this guard. No keep-alive: see GuardedHttpAgent. */
  readonly httpAgent: http.Agent = new GuardedHttpAgent(this);
  readonly httpsAgent: https.Agent = new GuardedHttpsAgent(this);
}

type CreateCallback = (err: Error | null, stream: Duplex) => void;

/**
 * The guard's check in front of an agent's createConnection: a refusal is reported as the
 * request's 'error' through the callback, and no socket is ever opened.
 */
function guardedConnect(guard: OutboundGuard, options: http.ClientRequestArgs, callback: CreateCallback | undefined, connect: () => Duplex | null | undefined): Duplex | null | undefined {
  const refused = guard.prepareConnection(options);
  if (refused) {
    callback?.(refused, undefined as unknown as Duplex);
    return undefined;
  }
  return connect();
}

/**
 * http.Agent that connects only where the guard allows. Keep-alive is off on purpose: a reused
 * idle socket that the server already closed fails as a "reset" that looks ambiguous, which would
 * flag deliveries as possible duplicates for nothing; one connection per request is honest and,
 * at chat-platform rates, cheap.
 */
export class GuardedHttpAgent extends http.Agent {
  constructor(private readonly guard: OutboundGuard) {
    super({ keepAlive: false });
  }

  override createConnection(options: http.ClientRequestArgs, callback?: CreateCallback): Duplex | null | undefined {
    return guardedConnect(this.guard, options, callback, () => super.createConnection(options, callback));
  }
}

/** https.Agent twin of GuardedHttpAgent (the guarded lookup also covers tls.connect). */
export class GuardedHttpsAgent extends https.Agent {
  constructor(private readonly guard: OutboundGuard) {
    super({ keepAlive: false });
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
export async function resolveGuardedSmtpHost(host: string, allow: OutboundAllow, opts: OutboundGuardOptions = {}): Promise<GuardedSmtpTarget> {
  const guard = new OutboundGuard(allow, opts);
  const [first] = await guard.resolve(host);
  const name = normalizeHost(host);
  // resolve() never returns an empty list; the fallback keeps the types honest.
  if (!first) throw new OutboundError('dns_failure', `${name} has no address`);
  return { address: first.address, family: first.family, servername: isIP(name) === 0 ? name : null };
}
