import { describe, expect, it } from 'vitest';
import { maskAddress, normalizeEmail, SubscriberEmailSchema } from '../../src/domain/subscriber/address.js';
import { concerns } from '../../src/domain/subscriber/match.js';

/** Who a notice concerns, and the address rules a subscription starts with (src/domain/subscriber/). */
describe('concerns', () => {
  const sub = (components: string[]) => ({ components });
  const notice = (component_ids: string[]) => ({ component_ids });

  it('a subscriber of everything hears of every notice', () => {
    expect(concerns(sub([]), notice(['cmp_a']))).toBe(true);
    expect(concerns(sub([]), notice([]))).toBe(true);
  });

  it('a notice that names no component concerns everyone', () => {
    expect(concerns(sub(['cmp_a']), notice([]))).toBe(true);
  });

  it('otherwise they must share a component', () => {
    expect(concerns(sub(['cmp_a', 'cmp_b']), notice(['cmp_c', 'cmp_b']))).toBe(true);
    expect(concerns(sub(['cmp_a']), notice(['cmp_b', 'cmp_c']))).toBe(false);
  });
});

describe('subscriber e-mail addresses', () => {
  const parse = (v: unknown) => SubscriberEmailSchema.safeParse(v);

  it('trims and lower-cases the domain, keeping the local part as given', () => {
    expect(parse('  Jane.Doe@Example.COM ').data).toBe('Jane.Doe@example.com');
    expect(normalizeEmail(' Jane@EXAMPLE.org')).toBe('Jane@example.org');
  });

  it('refuses what is not an address, with a message a person can act on', () => {
    for (const bad of ['', '   ', 'jane', 'jane@', '@example.com', 'jane@@example.com', 'jane doe@example.com']) {
      const r = parse(bad);
      expect(r.success, bad).toBe(false);
      expect(r.error?.issues[0]?.message).toMatch(/^Enter (an|a valid) e-mail address/);
    }
    expect(parse(42).error?.issues[0]?.message).toBe('Enter an e-mail address.');
  });

  it('refuses an address over 254 characters', () => {
    const long = `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(58)}.com`;
    expect(long.length).toBe(255);
    expect(parse(long).error?.issues[0]?.message).toMatch(/at most 254/);
    expect(parse(long.slice(1)).success).toBe(true);
  });
});

describe('maskAddress', () => {
  it('shows an e-mail address by its first character and domain', () => {
    expect(maskAddress('jane@example.com')).toBe('j•••@example.com');
    expect(maskAddress('Ölaf@beispiel.de')).toBe('Ö•••@beispiel.de');
  });

  it('shows a URL by its origin only (the path may carry a secret)', () => {
    expect(maskAddress('https://hooks.example.com/in/s3cr3t?token=x')).toBe('https://hooks.example.com/…');
    expect(maskAddress('https://user:pw@hooks.example.com:8443/x')).toBe('https://hooks.example.com:8443/…');
  });

  it('shows nothing of what is neither', () => {
    expect(maskAddress('no-at-sign')).toBe('•••');
  });
});
