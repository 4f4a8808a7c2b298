import { describe, expect, it } from 'vitest';
import {
  addressRange,
  canonicalAddress,
  describeAddress,
  isIpLiteral,
  isPublicUnicast,
  OutboundAllow,
  OutboundAllowError,
  parseOutboundAllow,
  permitsAddress,
  refuseLiteralHost,
} from '../../src/domain/connection/address-policy.js';

describe('isPublicUnicast', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.1', 'loopback'],
    ['0x7f.1', 'loopback'],
    ['2130706433', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.5.4', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    ['224.0.0.1', 'multicast'],
    ['192.0.2.10', 'reserved'],
    ['198.51.100.1', 'reserved'],
    ['203.0.113.1', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['::', 'unspecified'],
    ['fd00::1', 'uniqueLocal'],
    ['fc00::1', 'uniqueLocal'],
    ['fe80::1', 'linkLocal'],
    ['fe80::1%eth0', 'linkLocal'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['[::ffff:127.0.0.1]', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'linkLocal'],
    ['::ffff:10.0.0.1', 'private'],
    ['::7f00:1', 'reserved'],
    ['64:ff9b::7f00:1', 'rfc6052'],
    ['2002:7f00:1::1', '6to4'],
  ])('refuses %s (%s)', (ip, range) => {
    expect(isPublicUnicast(ip)).toBe(false);
    expect(addressRange(ip)).toBe(range);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '2001:4860::8888',
    '2606:4700:4700::1111',
    '[2001:4860:4860::8888]',
    '::ffff:8.8.8.8',
  ])('accepts public %s', (ip) => {
    expect(isPublicUnicast(ip)).toBe(true);
  });

  it('never calls a host name public, and tells names from literals', () => {
    expect(isPublicUnicast('example.com')).toBe(false);
    expect(isIpLiteral('example.com')).toBe(false);
    expect(isIpLiteral('[::1]')).toBe(true);
    expect(addressRange('example.com')).toBeNull();
  });

  it('names the address the way it is judged', () => {
    expect(canonicalAddress('::ffff:7f00:1')).toBe('127.0.0.1');
    expect(describeAddress('169.254.169.254')).toBe('169.254.169.254 is a link-local address');
    expect(describeAddress('[::ffff:127.0.0.1]')).toBe('127.0.0.1 is a loopback address');
  });
});

describe('OutboundAllow', () => {
  const allow = parseOutboundAllow([
    '127.0.0.1/32',
    '10.1.0.0/16',
    '::1/128',
    'localhost',
    'Sink.Test.',
    '*.internal.example',
    '192.168.7.7',
  ]);

  it('allows addresses inside listed CIDRs, IPv4-mapped forms included', () => {
    expect(allow.allows('127.0.0.1')).toBe(true);
    expect(allow.allows('::ffff:127.0.0.1')).toBe(true);
    expect(allow.allows('[::ffff:7f00:1]')).toBe(true);
    expect(allow.allows('127.0.0.2')).toBe(false);
    expect(allow.allows('10.1.200.3')).toBe(true);
    expect(allow.allows('10.2.0.1')).toBe(false);
    expect(allow.allows('[::1]')).toBe(true);
    expect(allow.allows('192.168.7.7')).toBe(true);
    expect(allow.allows('192.168.7.8')).toBe(false);
  });

  it('answers the same for a host asked again, however many other hosts were asked in between', () => {
    const asked = ['10.1.0.9', '10.2.0.9', 'localhost', 'evil.sink.test'];
    const first = asked.map((h) => allow.allows(h));
    expect(first).toEqual([true, false, true, false]);
    // More hosts than the answers it keeps: the early ones are judged afresh, the same way.
    for (let i = 0; i < 3000; i++) expect(allow.allows(`10.${1 + (i % 2)}.${i >> 8}.${i & 255}`)).toBe(i % 2 === 0);
    expect(asked.map((h) => allow.allows(h))).toEqual(first);
  });

  it('allows listed host names exactly, case-insensitively, and *. suffixes', () => {
    expect(allow.allows('localhost')).toBe(true);
    expect(allow.allows('LOCALHOST.')).toBe(true);
    expect(allow.allows('sink.test')).toBe(true);
    expect(allow.allows('evil.sink.test')).toBe(false);
    expect(allow.allows('a.internal.example')).toBe(true);
    expect(allow.allows('internal.example')).toBe(false);
    expect(allow.allows('notinternal.example')).toBe(false);
    // A name never matches a CIDR, and an address never matches a name.
    expect(allow.allowsHost('127.0.0.1')).toBe(false);
    expect(allow.allowsAddress('localhost')).toBe(false);
  });

  it('reads a mapped-IPv6 CIDR as the IPv4 range it covers', () => {
    const a = parseOutboundAllow(['::ffff:10.0.0.0/104']);
    expect(a.allows('10.9.9.9')).toBe(true);
    expect(a.allows('11.0.0.1')).toBe(false);
  });

  it('refuses bad entries, naming them', () => {
    expect(() => parseOutboundAllow(['127.0.0.1/33', 'ok.example', 'bad host', '10.0.0.0/8/9'])).toThrow(
      OutboundAllowError,
    );
    try {
      parseOutboundAllow(['127.0.0.1/33', 'bad host']);
    } catch (e) {
      expect((e as OutboundAllowError).entries).toEqual(['127.0.0.1/33', 'bad host']);
    }
  });

  it('allows nothing by default', () => {
    expect(OutboundAllow.none.isEmpty).toBe(true);
    expect(parseOutboundAllow([]).allows('127.0.0.1')).toBe(false);
  });

  it('permitsAddress: public, or inside an allowed CIDR', () => {
    expect(permitsAddress('8.8.8.8', OutboundAllow.none)).toBe(true);
    expect(permitsAddress('127.0.0.1', OutboundAllow.none)).toBe(false);
    expect(permitsAddress('127.0.0.1', allow)).toBe(true);
  });
});

describe('refuseLiteralHost (the create-time rule)', () => {
  it('refuses literal non-public addresses and localhost, passes names and public addresses', () => {
    expect(refuseLiteralHost('127.0.0.1', OutboundAllow.none)?.reason).toBe('non_public_address');
    expect(refuseLiteralHost('[::ffff:127.0.0.1]', OutboundAllow.none)?.reason).toBe('non_public_address');
    expect(refuseLiteralHost('localhost', OutboundAllow.none)?.reason).toBe('loopback_name');
    expect(refuseLiteralHost('api.localhost', OutboundAllow.none)?.reason).toBe('loopback_name');
    expect(refuseLiteralHost('internal.corp', OutboundAllow.none)).toBeNull();
    expect(refuseLiteralHost('8.8.8.8', OutboundAllow.none)).toBeNull();
    expect(refuseLiteralHost('127.0.0.1', parseOutboundAllow(['127.0.0.1/32']))).toBeNull();
    expect(refuseLiteralHost('localhost', parseOutboundAllow(['localhost']))).toBeNull();
  });
});
