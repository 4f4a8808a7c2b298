import type { Request, Response } from 'express';
import type { z } from 'zod';
import type { Scope } from '../domain/common/api-key.js';
import { parsePageRequest, type Page, type PageRequest } from '../domain/common/pagination.js';
import { isShared } from '../domain/common/shared-record.js';
import { pathParam, type OperationDoc, type Route } from './endpoint.js';
import { ifMatchRevision, setEtag } from './etag.js';
import { json, ListQuery, problem } from './operation-docs.js';
import { pageJson } from './presenters/page.js';

/**
 * A list answer: `limit`/`cursor` read first (their 4xx come before the list's own), then one
 * presented page (presenters/page.ts), written around each record's JSON (jsonOf).
 */
export async function sendPage<T, W>(
  req: Request,
  res: Response,
  list: (page: PageRequest) => Promise<Page<T>>,
  present: (item: T) => W,
): Promise<void> {
  const page = parsePageRequest(req.query.limit, req.query.cursor);
  sendJsonText(
    res,
    pageJson(await list(page), page, (item) => jsonOf(item, present)),
  );
}

/**
 * A handler that answers one record (a get, or a write that answers the record), its revision as
 * the ETag, so the client can send it back as If-Match.
 */
export const versioned =
  <D, T>(
    load: (req: Request, res: Response, deps: D) => Promise<T>,
    revOf: (record: T) => number,
    present: (record: T) => unknown,
  ) =>
  async (req: Request, res: Response, deps: D): Promise<void> => {
    const record = await load(req, res, deps);
    setEtag(res, revOf(record));
    sendJsonText(res, jsonOf(record, present));
  };

/** What res.json sends, from JSON already written: the same Content-Type (Express adds the charset). */
function sendJsonText(res: Response, text: string): void {
  if (!res.get('Content-Type')) res.set('Content-Type', 'application/json');
  res.send(text);
}

/** Per presenter, the JSON of each shared record it presented (they live as long as the record). */
const presented = new WeakMap<(record: never) => unknown, WeakMap<object, string>>();

/**
 * `present(record)` as JSON. A record shared between requests (domain/common/shared-record.ts: an
 * incident read unchanged again) is presented and serialised once for all of them; any other is
 * serialised each time (keeping it would cost more than it saves).
 */
function jsonOf<T>(record: T, present: (record: T) => unknown): string {
  if (typeof record !== 'object' || record === null || !isShared(record)) return JSON.stringify(present(record));
  let texts = presented.get(present);
  if (texts === undefined) presented.set(present, (texts = new WeakMap()));
  let text = texts.get(record);
  if (text === undefined) texts.set(record, (text = JSON.stringify(present(record))));
  return text;
}

interface Described {
  path: string;
  scope: Scope;
  operationId: string;
  summary: string;
}

/** GET of a page of records: `limit` and `cursor` (plus `query`, when the list takes more) → the list envelope. */
export function listRoute<D, T>(
  o: Described &
    Pick<OperationDoc, 'responses'> & {
      query?: z.ZodObject;
      list: (req: Request, deps: D, page: PageRequest) => Promise<Page<T>>;
      present: (item: T) => unknown;
    },
): Route<D> {
  return {
    method: 'get',
    path: o.path,
    scope: o.scope,
    doc: { operationId: o.operationId, summary: o.summary, query: o.query ?? ListQuery, responses: o.responses },
    handle: (req, res, deps) => sendPage(req, res, (page) => o.list(req, deps, page), o.present),
  };
}

/** GET of one record by `:id` (404 when there is none), its revision as the ETag. */
export function getRoute<D, T>(
  o: Described & {
    noun: string;
    schema: z.ZodType;
    load: (id: string, deps: D) => Promise<T>;
    revOf: (record: T) => number;
    present: (record: T) => unknown;
  },
): Route<D> {
  return {
    method: 'get',
    path: o.path,
    scope: o.scope,
    doc: {
      operationId: o.operationId,
      summary: o.summary,
      etag: true,
      responses: { 200: json(o.schema, `The ${o.noun}; ETag header set.`), 404: problem('not_found') },
    },
    handle: versioned((req, _res, deps: D) => o.load(pathParam(req, 'id'), deps), o.revOf, o.present),
  };
}

/** PATCH of one record by `:id` under If-Match, answering the new version with its ETag. */
export function patchRoute<D, T>(
  o: Described &
    Pick<OperationDoc, 'responses'> & {
      body: z.ZodType;
      update: (id: string, input: unknown, ifMatch: number | null, res: Response, deps: D) => Promise<T>;
      revOf: (record: T) => number;
      present: (record: T) => unknown;
    },
): Route<D> {
  return {
    method: 'patch',
    path: o.path,
    scope: o.scope,
    doc: {
      operationId: o.operationId,
      summary: o.summary,
      body: o.body,
      ifMatch: true,
      etag: true,
      responses: o.responses,
    },
    handle: versioned(
      (req, res, deps: D) => o.update(pathParam(req, 'id'), req.body, ifMatchRevision(req), res, deps),
      o.revOf,
      o.present,
    ),
  };
}

/** DELETE of one record, guarded by If-Match (412 when stale) → 204. */
export function deleteRoute<D>(
  o: Described &
    Pick<OperationDoc, 'responses'> & {
      remove: (id: string, ifMatch: number | null, deps: D) => Promise<void>;
    },
): Route<D> {
  return {
    method: 'delete',
    path: o.path,
    scope: o.scope,
    doc: {
      operationId: o.operationId,
      summary: o.summary,
      ifMatch: true,
      responses: {
        204: { description: 'Deleted.' },
        404: problem('not_found'),
        412: problem('If-Match is stale.'),
        ...o.responses,
      },
    },
    handle: async (req, res, deps: D) => {
      await o.remove(pathParam(req, 'id'), ifMatchRevision(req), deps);
      res.status(204).end();
    },
  };
}
