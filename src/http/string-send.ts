import type { Express, Response } from 'express';

/**
 * Express's res.send turns every string body of 1,000 characters or more into a Buffer before
 * writing it (to measure it, and for an ETag Herald does not use). Each such Buffer is C memory
 * that only goes back when V8 next collects the Buffer object, so under load the answers of many
 * requests wait in it at once: a list page is 20-40 KB, 6-7k a second in the bench. The C library
 * then keeps the heap they grew to, as free memory it does not return: on Node 24, whose young
 * generation is four times Node 20's, 35 MB of a 145 MB RSS at rest (docs/performance.md).
 *
 * Written as a string instead, Node encodes it into memory of its own that is freed as soon as
 * the socket has taken the bytes, whatever V8 does. Only what Express would convert takes this
 * path, and only when the answer is certain to be Express's byte for byte; everything else is
 * Express's own send.
 */
export const LONG_STRING = 1000;

/** What Express's send writes a string's type as, once it has set the charset (setCharset). */
const UTF8_TYPE = /^[^;]+; charset=utf-8$/;

export function sendLongStringsAsStrings(app: Express): void {
  const expressSend = app.response.send;
  app.response.send = function send(this: Response, body?: unknown): Response {
    const type = this.get('Content-Type');
    if (
      typeof body !== 'string' ||
      body.length < LONG_STRING ||
      typeof type !== 'string' ||
      !UTF8_TYPE.test(type) ||
      typeof this.app.get('etag fn') === 'function' ||
      this.statusCode === 204 ||
      this.statusCode === 205 ||
      this.statusCode === 304
    ) {
      return expressSend.call(this, body);
    }
    // From here, Express's send for this case: freshness first (a 304 carries no body and none
    // of its headers), then Content-Length unless chunked, and no body for HEAD.
    if (this.req.fresh) {
      this.status(304);
      this.removeHeader('Content-Type');
      this.removeHeader('Content-Length');
      this.removeHeader('Transfer-Encoding');
      this.end();
      return this;
    }
    if (!this.get('Transfer-Encoding')) this.set('Content-Length', String(Buffer.byteLength(body, 'utf8')));
    if (this.req.method === 'HEAD') this.end();
    else this.end(body, 'utf8');
    return this;
  } as Response['send'];
}
