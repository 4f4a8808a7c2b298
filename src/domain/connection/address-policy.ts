import ipaddr from 'ipaddr.js';

/**
 * Outbound address policy (docs/explanation/delivery-semantics.md, Outbound safety), pure: it classifies literal
 * addresses and reads the operator's allow list; it never resolves a name. Two callers share it:
 *
 * - create/PATCH of a connection (services/connections.ts): a destination whose host is a
 *   LITERAL non-public address is refused up front (`destination_not_allowed`);
 * - the connect-time guard of deliveries and tests (delivery/): after DNS resolution every
 *   address must pass `permitsAddress`, unless the host name itself is allow-listed
 *   (`allow.allowsHost`). That is what makes the guard DNS-rebinding safe.
 *
 * How to use it at connect time:
 * ```ts
 * if (!allow.allows(hostname)) {
 *   for (const ip of resolvedAddresses) if (!permitsAddress(ip, allow)) refuse(describeAddress(ip));
 * }
 * if (url.protocol !== 'https:' && !allow.allows(hostname)) refuse('https required');
 * ```
 */

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** Host names that mean loopback without asking DNS (RFC 6761): refused like 127.0.0.1. */
const LOOPBACK_NAMES = /^(?:.+\.)?localhost$/;

/** Global unicast IPv6 is 2000::/3; anything outside it is never a public destination. */
const IPV6_GLOBAL = ipaddr.IPv6.parseCIDR('2000::/3');

/**
 * Lower-cases a host and strips what URLs and configs wrap it in: `[…]` around IPv6, one
 * trailing dot of a fully-qualified name. `Example.COM.` → `example.com`, `[::1]` → `::1`.
 */
export function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.') && !h.endsWith('..')) h = h.slice(0, -1);
  return h;
}

/**
 * Parses a literal address the way a resolver would read it (so `127.1`, `0x7f.1` and `2130706433`
 * are all 127.0.0.1), with IPv4-mapped IPv6 (`::ffff:127.0.0.1`, `::ffff:7f00:1`) unwrapped to the
 * IPv4 it carries. Null when `host` is a name, not an address.
 */
function parseLiteral(host: string): Address | null {
  const h = normalizeHost(host);
  if (!ipaddr.isValid(h)) return null;
  try {
    return ipaddr.process(h);
  } catch {
    return null;
  }
}

/** True when `host` is an IP address literal (bracketed IPv6 included) rather than a name. */
export function isIpLiteral(host: string): boolean {
  return parseLiteral(host) !== null;
}

/**
 * The canonical text of a literal address (`::ffff:7f00:1` → `127.0.0.1`), or null for a name.
 * Useful for messages and for comparing addresses written differently.
 */
export function canonicalAddress(host: string): string | null {
  const a = parseLiteral(host);
  return a === null ? null : a.toString();
}

/**
 * The special-purpose range an address falls in (`loopback`, `private`, `linkLocal`,
 * `carrierGradeNat`, `uniqueLocal`, `multicast`, `reserved`, `unspecified`, `broadcast`, …), or
 * `unicast` for an ordinary public one. IPv6 outside 2000::/3 is `reserved`. Null for a name.
 */
export function addressRange(host: string): string | null {
  const a = parseLiteral(host);
  if (a === null) return null;
  if (a.kind() === 'ipv6' && !a.match(IPV6_GLOBAL)) return a.range() === 'unicast' ? 'reserved' : a.range();
  return a.range();
}

/**
 * True only for a public unicast address. Refused: loopback, private (RFC 1918), link-local
 * (169.254.0.0/16, the cloud metadata address included; fe80::/10), CGNAT 100.64.0.0/10,
 * unique-local fc00::/7, multicast, broadcast, unspecified and 0.0.0.0/8, documentation,
 * benchmarking and other reserved ranges, 6to4/Teredo/NAT64 (they tunnel to IPv4 we cannot
 * judge), and any IPv6 outside global unicast 2000::/3. IPv4-mapped IPv6 is judged as its IPv4.
 * A host name (not a literal) is never "public unicast": resolve it first.
 */
export function isPublicUnicast(ip: string): boolean {
  return addressRange(ip) === 'unicast';
}

/** Human words for a refused address, for problem details and test results. */
export function describeAddress(ip: string): string {
  const range = addressRange(ip);
  if (range === null) return `${ip} is not an IP address`;
  const words: Record<string, string> = {
    loopback: 'a loopback address',
    private: 'a private address',
    linkLocal: 'a link-local address',
    carrierGradeNat: 'a carrier-grade NAT address',
    uniqueLocal: 'a unique-local address',
    multicast: 'a multicast address',
    broadcast: 'the broadcast address',
    unspecified: 'an unspecified address',
    unicast: 'a public address',
  };
  return `${canonicalAddress(ip) ?? ip} is ${words[range] ?? 'a reserved address'}`;
}

/** How many hosts OutboundAllow.allows keeps its answer for. */
const ALLOWS_KEPT = 1024;

/** True when `host` is `localhost` or a name under `.localhost`, which always mean loopback. */
export function isLoopbackName(host: string): boolean {
  return LOOPBACK_NAMES.test(normalizeHost(host));
}

// ── the allow list ───────────────────────────────────────────────────────────────────────────

export class OutboundAllowError extends Error {
  constructor(readonly entries: string[]) {
    super(
      `HERALD_OUTBOUND_ALLOW has entries that are neither a CIDR, an address nor a host name: ${entries.join(', ')}`,
    );
    this.name = 'OutboundAllowError';
  }
}

const HOST_NAME =
  /^(?=.{1,253}$)(?:\*\.)?[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/**
 * HERALD_OUTBOUND_ALLOW, parsed: holes the operator opens on purpose. Each entry is a CIDR
 * (`127.0.0.1/32`, `fd00::/8`), a bare address (a /32 or /128), a host name (`localhost`, exact,
 * case-insensitive) or `*.name` (every name under it, not the name itself). An allowed host or
 * address skips the public-unicast rule AND the https rule.
 */
export class OutboundAllow {
  private constructor(
    private readonly cidrs: [Address, number][],
    private readonly names: Set<string>,
    private readonly suffixes: string[],
  ) {}

  /** allows()' answers so far, by host as asked (at most ALLOWS_KEPT). */
  private readonly answers = new Map<string, boolean>();

  /** An allow list that allows nothing (the default). */
  static readonly none = new OutboundAllow([], new Set(), []);

  /** Parses entries (already split on commas); throws OutboundAllowError naming the bad ones. */
  static parse(entries: readonly string[]): OutboundAllow {
    const cidrs: [Address, number][] = [];
    const names = new Set<string>();
    const suffixes: string[] = [];
    const bad: string[] = [];
    for (const raw of entries) {
      const entry = raw.trim();
      if (entry === '') continue;
      if (entry.includes('/')) {
        const parts = entry.split('/');
        const [addr = '', bits = ''] = parts;
        if (parts.length !== 2) {
          bad.push(entry);
          continue;
        }
        const literal = parseLiteral(addr);
        const n = /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
        if (literal === null) {
          bad.push(entry);
          continue;
        }
        // A mapped-IPv6 CIDR (::ffff:10.0.0.0/104) is read as the IPv4 CIDR it covers.
        const wasMapped = literal.kind() === 'ipv4' && normalizeHost(addr).includes(':');
        const width = literal.kind() === 'ipv4' ? 32 : 128;
        const prefix = wasMapped ? n - 96 : n;
        if (!Number.isInteger(prefix) || prefix < 0 || prefix > width) bad.push(entry);
        else cidrs.push([literal, prefix]);
        continue;
      }
      const literal = parseLiteral(entry);
      if (literal !== null) {
        cidrs.push([literal, literal.kind() === 'ipv4' ? 32 : 128]);
        continue;
      }
      const name = normalizeHost(entry);
      if (!HOST_NAME.test(name)) bad.push(entry);
      else if (name.startsWith('*.')) suffixes.push(name.slice(1));
      else names.add(name);
    }
    if (bad.length > 0) throw new OutboundAllowError(bad);
    return new OutboundAllow(cidrs, names, suffixes);
  }

  /** True when the literal address is inside an allowed CIDR (mapped IPv6 judged as IPv4). */
  allowsAddress(ip: string): boolean {
    const a = parseLiteral(ip);
    if (a === null) return false;
    return this.cidrs.some(([net, bits]) => net.kind() === a.kind() && a.match(net, bits));
  }

  /** True when the host NAME is listed (exactly, or under a `*.` entry). Addresses: use allowsAddress. */
  allowsHost(name: string): boolean {
    const h = normalizeHost(name);
    if (isIpLiteral(h)) return false;
    return this.names.has(h) || this.suffixes.some((s) => h.endsWith(s));
  }

  /**
   * `allowsAddress` for a literal, `allowsHost` for a name: the one question most callers ask,
   * once per plain-http send. The answer depends only on the host and this (fixed) list, so it
   * is kept: parsing the literal each time was about 1 % of a webhook delivery's CPU.
   */
  allows(hostOrIp: string): boolean {
    let answer = this.answers.get(hostOrIp);
    if (answer === undefined) {
      answer = isIpLiteral(hostOrIp) ? this.allowsAddress(hostOrIp) : this.allowsHost(hostOrIp);
      // Bounded: hosts come from connections' URLs, which any number of API calls may add.
      if (this.answers.size >= ALLOWS_KEPT) this.answers.clear();
      this.answers.set(hostOrIp, answer);
    }
    return answer;
  }

  /** True when nothing is allowed (no holes). */
  get isEmpty(): boolean {
    return this.cidrs.length === 0 && this.names.size === 0 && this.suffixes.length === 0;
  }
}

/** Shorthand for OutboundAllow.parse. */
export function parseOutboundAllow(entries: readonly string[]): OutboundAllow {
  return OutboundAllow.parse(entries);
}

/**
 * The connect-time rule for one resolved address: public unicast, or inside an allowed CIDR.
 * (The caller skips this when the host name itself is allowed.)
 */
export function permitsAddress(ip: string, allow: OutboundAllow): boolean {
  return allow.allowsAddress(ip) || isPublicUnicast(ip);
}

/** Why a destination host is refused before any lookup, or null when it may proceed. */
export type HostRefusal =
  { reason: 'non_public_address'; detail: string } | { reason: 'loopback_name'; detail: string };

/**
 * The create-time rule (no DNS): a literal host must be public unicast or allowed; `localhost`
 * names are refused unless allowed; any other name passes here and is judged at connect time.
 */
export function refuseLiteralHost(host: string, allow: OutboundAllow): HostRefusal | null {
  if (allow.allows(host)) return null;
  if (isIpLiteral(host)) {
    return isPublicUnicast(host) ? null : { reason: 'non_public_address', detail: describeAddress(host) };
  }
  if (isLoopbackName(host))
    return { reason: 'loopback_name', detail: `${normalizeHost(host)} always means this machine (loopback)` };
  return null;
}
