import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { isIPv4 } from 'node:net';

/**
 * A self-signed X.509 certificate made at test time with node:crypto alone (no openssl binary,
 * no npm package): an ECDSA P-256 key and a v3 certificate for `localhost` and 127.0.0.1, valid
 * for a day. Pass `cert` to a client as its `ca` to get real certificate verification.
 *
 * The DER below is the minimum RFC 5280 asks for; it is a test fixture, never used by src/.
 */
export interface SelfSignedCert {
  /** PEM certificate (also the CA a client must trust). */
  cert: string;
  /** PEM private key (PKCS#8). */
  key: string;
}

const der = (tag: number, ...parts: Buffer[]): Buffer => {
  const body = Buffer.concat(parts);
  const n = body.length;
  const len = n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), len, body]);
};
const seq = (...p: Buffer[]) => der(0x30, ...p);
const set = (...p: Buffer[]) => der(0x31, ...p);
const int = (b: Buffer) => der(0x02, b);
const utf8 = (s: string) => der(0x0c, Buffer.from(s, 'utf8'));
const octets = (b: Buffer) => der(0x04, b);
const bits = (b: Buffer) => der(0x03, Buffer.from([0]), b);
const bool = (v: boolean) => der(0x01, Buffer.from([v ? 0xff : 0]));
const explicit = (n: number, b: Buffer) => der(0xa0 + n, b);

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number) as [number, number, ...number[]];
  const bytes = [40 * a + b];
  for (const v of rest) {
    const chunk = [v & 0x7f];
    for (let x = v >> 7; x > 0; x >>= 7) chunk.unshift((x & 0x7f) | 0x80);
    bytes.push(...chunk);
  }
  return der(0x06, Buffer.from(bytes));
}

function utcTime(d: Date): Buffer {
  const p = (n: number) => String(n).padStart(2, '0');
  const s = `${p(d.getUTCFullYear() % 100)}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}Z`;
  return der(0x17, Buffer.from(s, 'ascii'));
}

const ECDSA_SHA256 = '1.2.840.10045.4.3.2';

export function createSelfSignedCert(names: string[] = ['localhost', '127.0.0.1']): SelfSignedCert {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const name = seq(set(seq(oid('2.5.4.3'), utf8(names[0] ?? 'localhost'))));
  const serial = randomBytes(8);
  // A positive INTEGER in minimal DER: the high bit clear (positive) and the first byte never 0x00,
  // which DER forbids before a byte below 0x80 (OpenSSL 3 refuses it as "illegal padding": 1
  // certificate in about 256 failed that way).
  serial[0] = (serial[0]! & 0x7f) | 0x40;
  const now = Date.now();
  const san = seq(
    ...names.map((n) =>
      isIPv4(n) ? der(0x87, Buffer.from(n.split('.').map(Number))) : der(0x82, Buffer.from(n, 'ascii')),
    ),
  );
  const extensions = seq(
    seq(oid('2.5.29.19'), bool(true), octets(seq(bool(true)))), // basicConstraints: CA (it is its own trust anchor)
    seq(oid('2.5.29.17'), octets(san)), // subjectAltName
  );
  const tbs = seq(
    explicit(0, int(Buffer.from([2]))), // v3
    int(serial),
    seq(oid(ECDSA_SHA256)),
    name,
    seq(utcTime(new Date(now - 60_000)), utcTime(new Date(now + 24 * 3600_000))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, extensions),
  );
  const signature = sign('sha256', tbs, privateKey); // DER-encoded ECDSA signature
  const certDer = seq(tbs, seq(oid(ECDSA_SHA256)), bits(signature));
  const b64 = certDer.toString('base64').replace(/.{64}/g, '$&\n');
  return {
    cert: `-----BEGIN CERTIFICATE-----\n${b64}${b64.endsWith('\n') ? '' : '\n'}-----END CERTIFICATE-----\n`,
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}
