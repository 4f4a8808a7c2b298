/** Time is injected everywhere: services take a Clock, tests pin it. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** RFC 3339 UTC with milliseconds, the only time format on the wire. */
export const iso = (d: Date): string => d.toISOString();
