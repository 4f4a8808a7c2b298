/** Field and request limits of docs/api.md, named once and used by every schema and edge. */
export const LIMITS = {
  title: 200,
  longText: 10_000,
  templateBody: 20_000,
  templateName: 100,
  templateIds: 20,
  variables: 50,
  variableValue: 4_000,
  variableName: /^[A-Za-z_][A-Za-z0-9_]{0,63}$/,
  bulkTemplates: 100,
  bodyBytes: 256 * 1024,
  pageDefault: 25,
  pageMax: 100,
  idempotencyKeyMax: 255,
  idempotencyTtlSeconds: 24 * 60 * 60,
  connectionName: 100,
  keyName: 100,
} as const;
