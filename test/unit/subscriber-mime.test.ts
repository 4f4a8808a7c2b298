import { simpleParser } from 'mailparser';
import { describe, expect, it } from 'vitest';
import { composeMail, type MimeMail } from '../../src/subscribers/mime.js';

/**
 * The wire form of a subscriber mail (src/subscribers/mime.ts), read back by mailparser as a mail
 * client would: every field arrives as it was given, whatever its characters or length.
 */

const UNSUBSCRIBE = `https://status.acme.test/subscriptions/unsubscribe?token=${'u'.repeat(120)}.sig`;

function mail(o: Partial<MimeMail> = {}): MimeMail {
  return {
    from: 'Acme Status <status@acme.test>',
    to: 'jane.doe@example.com',
    subject: '[Acme] Zahlungen gestört: Ursache gefunden — „Fix“ läuft',
    text: `Grüße aus der Störung.\nEin = Zeichen, eine sehr lange Zeile ${'x'.repeat(200)}\n.\nEnde\n`,
    html: `<p>Grüße &amp; <a href="${UNSUBSCRIBE}">abmelden</a></p>\n<p>${'y'.repeat(300)}</p>`,
    headers: {
      'List-Unsubscribe': `<${UNSUBSCRIBE}>`,
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
      'Auto-Submitted': 'auto-generated',
      'X-Herald-Notice': 'ntc_dlv_01',
    },
    messageId: '<ntc_dlv_01.sub_1@herald>',
    date: new Date('2026-11-28T01:02:03Z'),
    ...o,
  };
}

async function roundTrip(m: MimeMail) {
  const composed = await composeMail(m);
  const raw = composed.raw.toString('utf8');
  return { composed, raw, parsed: await simpleParser(composed.raw) };
}

describe('a subscriber mail on the wire', () => {
  it('reads back as given: sender, recipient, subject, both parts, the headers', async () => {
    const m = mail();
    const { composed, raw, parsed } = await roundTrip(m);
    expect(composed.envelope).toEqual({ from: 'status@acme.test', to: ['jane.doe@example.com'] });
    expect(parsed.from?.value).toEqual([{ name: 'Acme Status', address: 'status@acme.test' }]);
    expect(parsed.to && !Array.isArray(parsed.to) ? parsed.to.value : null).toEqual([
      { name: '', address: 'jane.doe@example.com' },
    ]);
    expect(parsed.subject).toBe(m.subject);
    expect(parsed.text).toBe(m.text);
    expect(parsed.html).toBe(m.html);
    expect(parsed.messageId).toBe(m.messageId);
    expect(parsed.date?.toISOString()).toBe('2026-11-28T01:02:03.000Z');
    expect(parsed.headers.get('list')).toEqual({
      unsubscribe: { url: UNSUBSCRIBE },
      'unsubscribe-post': { name: 'List-Unsubscribe=One-Click' },
    });
    expect(parsed.headers.get('auto-submitted')).toBe('auto-generated');
    expect(parsed.headers.get('x-herald-notice')).toBe('ntc_dlv_01');
    // Plain ASCII on the wire, no line past 998 characters (RFC 5322), body lines within 76.
    expect([...raw].every((c) => c === '\t' || c === '\r' || c === '\n' || (c >= ' ' && c <= '~'))).toBe(true);
    const lines = raw.split('\r\n');
    expect(Math.max(...lines.map((l) => l.length))).toBeLessThanOrEqual(998);
    const body = raw.slice(raw.indexOf('\r\n\r\n'));
    expect(Math.max(...body.split('\r\n').map((l) => l.length))).toBeLessThanOrEqual(76);
    expect(raw.includes('\n') && !/[^\r]\n/.test(raw)).toBe(true);
  });

  it('keeps a line break in a value from starting a header of its own', async () => {
    const { parsed } = await roundTrip(
      mail({ subject: 'Outage\r\nBcc: victim@example.com', headers: { 'X-Herald-Notice': 'ntc\nBcc: a@b.c' } }),
    );
    expect(parsed.subject).toBe('Outage Bcc: victim@example.com');
    expect(parsed.bcc).toBeUndefined();
    expect(parsed.headers.get('x-herald-notice')).toBe('ntc Bcc: a@b.c');
  });

  it('quotes or encodes a sender name that needs it', async () => {
    for (const [from, name] of [
      ['"Acme, Inc. Status" <status@acme.test>', 'Acme, Inc. Status'],
      ['Störungsmelder <status@acme.test>', 'Störungsmelder'],
      ['status@acme.test', ''],
    ] as const) {
      const { parsed, composed } = await roundTrip(mail({ from }));
      expect(parsed.from?.value).toEqual([{ name, address: 'status@acme.test' }]);
      expect(composed.envelope.from).toBe('status@acme.test');
    }
  });

  it('leaves an address outside plain ASCII to nodemailer’s composer, which still forms it correctly', async () => {
    const { composed, parsed } = await roundTrip(mail({ to: 'jörg@bücher.example' }));
    // SMTPUTF8: the relay is asked for it; the headers carry the address as UTF-8.
    expect(composed.envelope).toEqual({ from: 'status@acme.test', to: ['jörg@bücher.example'] });
    expect(parsed.to && !Array.isArray(parsed.to) ? parsed.to.value : null).toEqual([
      { name: '', address: 'jörg@bücher.example' },
    ]);
    expect(parsed.subject).toBe(mail().subject);
    expect(parsed.text).toBe(mail().text);
    expect(parsed.headers.get('list')).toMatchObject({ unsubscribe: { url: UNSUBSCRIBE } });
  });

  it('gives every mail a boundary of its own', async () => {
    const a = (await composeMail(mail())).raw.toString();
    const b = (await composeMail(mail())).raw.toString();
    const boundary = (s: string) => /boundary="([^"]+)"/.exec(s)?.[1];
    expect(boundary(a)).toBeDefined();
    expect(boundary(a)).not.toBe(boundary(b));
  });
});
