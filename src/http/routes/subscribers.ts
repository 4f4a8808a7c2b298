import type { Request, Response, Router } from 'express';
import { parsePageRequest } from '../../domain/common/pagination.js';
import { z } from 'zod';
import { DomainError } from '../../domain/common/errors.js';
import { RECIPIENT_STATES } from '../../ports/subscribers.js';
import {
  ImportRequestSchema,
  SubscriberListQuerySchema,
  type ExportFormat,
  type NoticeRecipient,
  type SubscriberAdminService,
} from '../../services/subscriber-admin.js';
import { defineRoutes, mountRoutes, pathParam, queryString, type EdgeDeps } from '../endpoint.js';
import { idParam, json, ListQuery, problem } from '../operation-docs.js';
import { pageSchema } from '../presenters/page.js';
import {
  presentImportResult,
  presentNotice,
  presentReceipt,
  presentSubscriber,
  presentSubscriberSummary,
  SubscriberImportResultSchema,
  SubscriberNoticeSchema,
  SubscriberReceiptSchema,
  SubscriberSchema,
  SubscriberSummarySchema,
} from '../presenters/subscriber.js';
import { getRoute, listRoute } from '../respond.js';

type Deps = EdgeDeps & { subscribers: SubscriberAdminService };

const ExportQuery = z.object({
  format: z
    .enum(['csv', 'ndjson'])
    .optional()
    .meta({ description: '`csv` (a header row, RFC 4180) or `ndjson`. Default: csv.' }),
});

/** `limit`, `cursor` and `state` of a receipts list. */
export const ReceiptQuery = ListQuery.extend({
  state: z.enum(RECIPIENT_STATES).optional().meta({ description: 'Only receipts in this state.' }),
});

const CONTENT_TYPES: Record<ExportFormat, string> = {
  csv: 'text/csv; charset=utf-8; header=present',
  ndjson: 'application/x-ndjson; charset=utf-8',
};

/** The import's body limit: room for IMPORT_MAX_ROWS rows of about 200 bytes each. */
const IMPORT_BODY_BYTES = 2 * 1024 * 1024;

export const subscriberRouteTable = defineRoutes<Deps>(
  {
    tag: 'Subscribers',
    params: {
      id: idParam('id', 'sub'),
      noticeId: z
        .string()
        .meta({ param: { name: 'noticeId', in: 'path' }, example: 'ntc_dlv_01JH3ZK6X2B8V4N0Q7R5T9W1YC' }),
    },
  },
  [
    listRoute({
      path: '/subscribers',
      scope: 'subscribers:read',
      operationId: 'listSubscribers',
      summary: 'List subscribers of the status page (addresses masked)',
      query: ListQuery.extend(SubscriberListQuerySchema.shape),
      responses: {
        200: json(
          pageSchema(SubscriberSummarySchema, 'SubscriberPage'),
          'A page of subscribers. A page may be short (even empty) with a next_cursor when a filter matches few: follow it until it is null.',
        ),
        422: problem('Invalid filter.'),
      },
      list: (req, d: Deps, page) => d.subscribers.list(req.query, page),
      present: presentSubscriberSummary,
    }),
    // Before /subscribers/:id, though an id never reads `export`: the table stays in path order.
    {
      method: 'get',
      path: '/subscribers/export',
      scope: 'subscribers:read',
      doc: {
        operationId: 'exportSubscribers',
        summary: 'Export every subscriber, addresses included (streamed)',
        description:
          "Every subscriber once, with every field but its secrets (GDPR art. 15 and 20), streamed as it is read. CSV cells that would start a spreadsheet formula (`=`, `+`, `-`, `@`) are prefixed with `'`. Sent as an attachment.",
        query: ExportQuery,
        responses: {
          200: {
            description: 'The subscribers (Content-Disposition: attachment).',
            content: {
              'text/csv': { schema: z.string() },
              'application/x-ndjson': { schema: z.string() },
            },
          },
          422: problem('format is neither csv nor ndjson.'),
        },
      },
      handle: async (req, res, d) => {
        const parsed = ExportQuery.safeParse({ format: queryString(req.query.format) ?? req.query.format });
        if (!parsed.success)
          throw new DomainError('validation_failed', 'format must be csv or ndjson.', [
            { field: 'format', code: 'invalid', message: 'Use csv or ndjson.' },
          ]);
        const format = parsed.data.format ?? 'csv';
        res.status(200);
        res.set({
          'Content-Type': CONTENT_TYPES[format],
          'Content-Disposition': `attachment; filename="subscribers.${format}"`,
          'Cache-Control': 'no-store',
        });
        await streamExport(res, (write) => d.subscribers.export(format, write));
      },
    },
    {
      method: 'post',
      path: '/subscribers/import',
      scope: 'subscribers:write',
      // 10,000 rows of address, components and locale: more than the 256 KiB other bodies get.
      bodyLimit: IMPORT_BODY_BYTES,
      doc: {
        operationId: 'importSubscribers',
        summary: 'Import confirmed e-mail subscribers',
        description:
          'Idempotent by address: a new address is created confirmed (source `import:<source>`), a pending one is confirmed, a confirmed one is left unchanged, and an unsubscribed or bounced one is skipped: an import never subscribes again someone who left. A bad row (an invalid address, an unknown component id) is reported in `errors` and the rest are imported. Webhook subscribers cannot be imported: they confirm through their challenge.',
        body: ImportRequestSchema,
        responses: {
          200: json(SubscriberImportResultSchema, 'What the import did, row by row counted.'),
          422: problem('Invalid fields; `too_many` when `subscribers` has more than 10,000 rows.'),
        },
      },
      handle: async (req, res, d) => {
        res.status(200).json(presentImportResult(await d.subscribers.import(req.body)));
      },
    },
    getRoute({
      path: '/subscribers/:id',
      scope: 'subscribers:read',
      operationId: 'getSubscriber',
      summary: 'Get a subscriber, its address in full',
      noun: 'subscriber',
      schema: SubscriberSchema,
      load: (id, d: Deps) => d.subscribers.get(id),
      revOf: (s) => s.rev,
      present: presentSubscriber,
    }),
    {
      method: 'delete',
      path: '/subscribers/:id',
      scope: 'subscribers:write',
      doc: {
        operationId: 'eraseSubscriber',
        summary: 'Erase a subscriber at once (GDPR art. 17)',
        description:
          'Removes the record and its address now; its manage and unsubscribe links stop working (an unsubscribe link still answers "unsubscribed"). Receipts of notices sent to it keep only its id.',
        responses: { 204: { description: 'Erased.' }, 404: problem('not_found') },
      },
      handle: async (req, res, d) => {
        await d.subscribers.erase(pathParam(req, 'id'));
        res.status(204).end();
      },
    },
    {
      method: 'get',
      path: '/subscriber-notices/:noticeId',
      scope: 'subscribers:read',
      doc: {
        operationId: 'getSubscriberNotice',
        summary: 'Get a notice sent to subscribers, with its tally',
        description:
          'A notice is what subscribers are told of one status page update, correction, retraction or maintenance update: `ntc_<delivery id>` or `ntc_<maintenance id>_<update id>`.',
        responses: { 200: json(SubscriberNoticeSchema, 'The notice and its tally.'), 404: problem('not_found') },
      },
      handle: async (req, res, d) => {
        const { notice, tally } = await d.subscribers.notice(pathParam(req, 'noticeId'));
        res.json(presentNotice(notice, tally));
      },
    },
    {
      method: 'get',
      path: '/subscriber-notices/:noticeId/recipients',
      scope: 'subscribers:read',
      doc: {
        operationId: 'listSubscriberNoticeRecipients',
        summary: "A notice's receipt per subscriber",
        query: ReceiptQuery,
        responses: {
          200: json(pageSchema(SubscriberReceiptSchema, 'SubscriberReceiptPage'), 'A page of receipts.'),
          404: problem('not_found'),
          422: problem('Invalid state.'),
        },
      },
      handle: (req, res, d) =>
        sendReceipts(req, res, (state, limit, cursor) =>
          d.subscribers.recipients(pathParam(req, 'noticeId'), state, limit, cursor),
        ),
    },
  ],
);

/**
 * A page of receipts. Their cursor is the list's own (the store walks its hash, not ids in
 * order), so only `limit` is read the common way; the envelope is the common one.
 */
export async function sendReceipts(
  req: Request,
  res: Response,
  list: (
    state: unknown,
    limit: number,
    cursor: string | null,
  ) => Promise<{ data: NoticeRecipient[]; next: string | null }>,
): Promise<void> {
  const { limit } = parsePageRequest(req.query.limit, undefined);
  const cursor = req.query.cursor;
  if (cursor !== undefined && typeof cursor !== 'string')
    throw new DomainError('invalid_cursor', 'cursor must be a single string.');
  const state = queryString(req.query.state) ?? req.query.state;
  const page = await list(state, limit, cursor === undefined || cursor === '' ? null : cursor);
  res.json({ data: page.data.map(presentReceipt), pagination: { next_cursor: page.next, limit } });
}

/**
 * Writes the export as it is produced, waiting for the socket to drain after each chunk. Once the
 * first chunk is out the status is sent, so a failure after it can only cut the body short: the
 * connection is destroyed, and the client sees a truncated download rather than a clean end.
 */
async function streamExport(res: Response, run: (write: (chunk: string) => Promise<void>) => Promise<number>) {
  const write = (chunk: string): Promise<void> =>
    new Promise((resolve, reject) => {
      if (res.destroyed) return reject(new Error('the client went away'));
      if (res.write(chunk)) return resolve();
      const settle = (err?: Error) => {
        res.off('drain', onDrain);
        res.off('close', onClose);
        if (err) reject(err);
        else resolve();
      };
      const onDrain = () => settle();
      const onClose = () => settle(new Error('the client went away'));
      res.once('drain', onDrain);
      res.once('close', onClose);
    });
  try {
    await run(write);
  } catch (err) {
    if (!res.headersSent) throw err;
    res.destroy();
    return;
  }
  res.end();
}

export const subscriberRoutes = (d: Deps, app?: Router, base = ''): Router =>
  mountRoutes(d, subscriberRouteTable, app, base);
