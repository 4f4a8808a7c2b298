import { z } from 'zod';
import { encodeCursor, type Page, type PageRequest } from '../../domain/common/pagination.js';

export const PaginationSchema = z.object({ next_cursor: z.string().nullable(), limit: z.number().int() }).meta({
  id: 'Pagination',
  description: 'Pass next_cursor back as `cursor` for the next page; null on the last page.',
});

/** The list envelope's schema, registered under `id` (IncidentPage, TemplatePage, …). */
export const pageSchema = (item: z.ZodType, id: string) =>
  z.object({ data: z.array(item), pagination: PaginationSchema }).meta({ id });

const paginationOf = (page: Page<unknown>, req: PageRequest) => ({
  next_cursor: page.nextCursor ? encodeCursor(page.nextCursor) : null,
  limit: req.limit,
});

/** The list envelope of docs/api.md. */
export function presentPage<T, W>(page: Page<T>, req: PageRequest, present: (item: T) => W) {
  return { data: page.data.map(present), pagination: paginationOf(page, req) };
}

/**
 * `JSON.stringify(presentPage(page, req, present))`, written around each item's JSON as given
 * (`itemJson`), so JSON kept per record is not parsed and written again.
 */
export function pageJson<T>(page: Page<T>, req: PageRequest, itemJson: (item: T) => string): string {
  return `{"data":[${page.data.map(itemJson).join(',')}],"pagination":${JSON.stringify(paginationOf(page, req))}}`;
}
