import { encodeCursor, type Page, type PageRequest } from '../domain/pagination.js';

/** The list envelope of README "Conventions worth knowing". */
export function presentPage<T, W>(page: Page<T>, req: PageRequest, present: (item: T) => W) {
  return {
    data: page.data.map(present),
    pagination: { next_cursor: page.nextCursor ? encodeCursor(page.nextCursor) : null, limit: req.limit },
  };
}
