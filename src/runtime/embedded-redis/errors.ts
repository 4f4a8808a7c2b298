export class EmbeddedRedisError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EmbeddedRedisError';
  }
}

export const MISSING_REDIS_MESSAGE =
  'Herald needs Redis: REDIS_URL is not set and no redis-server was found on PATH for the embedded default. ' +
  'Either install redis-server (apt-get install redis-server, or brew install redis) or set REDIS_URL=redis://host:6379.';
