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
  /** Audiences a Herald holds at most (AudienceRepo.all reads them all). */
  audiences: 100,
  audienceName: 100,
  audienceConnections: 100,
  audienceTemplates: 100,
  audienceApprovers: 50,
  /** Components a Herald holds at most (the status page and RedisComponentRepo.listAll read them all). */
  components: 200,
  componentName: 100,
  componentGroup: 100,
  componentPosition: 100_000,
  /** Components one incident may name. */
  incidentComponents: 50,
} as const;
