import type { RequestHandler } from 'express';
import { randomUUID } from 'node:crypto';
import type { RequestLocals } from '../context.js';

const CLIENT_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** X-Request-Id on every response: the client's when it is sane, a fresh one otherwise. */
export const requestId: RequestHandler = (req, res, next) => {
  const given = req.get('X-Request-Id');
  const id = given !== undefined && CLIENT_ID.test(given) ? given : `req_${randomUUID().replace(/-/g, '')}`;
  (res.locals as RequestLocals).requestId = id;
  res.setHeader('X-Request-Id', id);
  next();
};
