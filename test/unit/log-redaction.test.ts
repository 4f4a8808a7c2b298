import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';

describe('logs', () => {
  it('redact tokens, secrets and webhook URLs wherever they appear', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString('utf8'));
        done();
      },
    });
    const log = createLogger('info', sink);
    log.info(
      {
        headers: { authorization: 'Bearer hld_secret' },
        token: 'hld_abc',
        connection: {
          config: { webhook_url: 'https://hooks.slack.com/services/T/B/secret', bot_token: 'xoxb-1' },
          secrets: { password: 'p' },
        },
        password: 'hunter2',
      },
      'something happened',
    );
    const out = lines.join('');
    for (const s of ['hld_secret', 'hld_abc', 'services/T/B/secret', 'xoxb-1', 'hunter2']) expect(out).not.toContain(s);
    expect(out).toContain('[redacted]');
    expect(JSON.parse(out).msg).toBe('something happened');
  });
});
