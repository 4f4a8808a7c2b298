/**
 * Reads `Authorization: Bearer <token>`. No header, or another scheme (`Basic …`), is a missing
 * token (RFC 6750 §3.1: no error code in the challenge); a Bearer header whose credentials are
 * not one token is malformed (''), answered with `error="invalid_token"`.
 */
export function bearerToken(header: string | undefined): string | null {
  if (header === undefined || !/^\s*Bearer(\s|$)/i.test(header)) return null;
  const m = /^\s*Bearer[ ]+(\S+)\s*$/i.exec(header);
  return m?.[1] ?? '';
}
