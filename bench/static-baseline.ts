/**
 * The baseline for the status page rows: a plain static file server (Express 5's
 * `express.static`, i.e. serve-static: stat, ETag, Last-Modified, a stream of the file) serving
 * the very bytes Herald answered, saved as files. What is left to compare is Herald's cache
 * lookup and headers against a file server's.
 * Env: STATIC_DIR (the files), PORT (0: any). Prints {"listening": port}.
 */
import express from 'express';
import { exitWithParent } from './lib.js';

exitWithParent();
const app = express();
app.disable('x-powered-by');
app.use(express.static(process.env.STATIC_DIR ?? '.', { maxAge: 10_000 }));
const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const a = server.address();
  process.stdout.write(`${JSON.stringify({ listening: typeof a === 'object' && a ? a.port : 0 })}\n`);
});
