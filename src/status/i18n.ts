import { de } from './locales/de.js';
import { en, type LocaleStrings } from './locales/en.js';

/** The locales the page is written in; a status_page connection's `locale` is one of these. */
export const STATUS_LOCALES = ['en', 'de'] as const;
export type StatusLocale = (typeof STATUS_LOCALES)[number];

const STRINGS: Record<StatusLocale, LocaleStrings> = { en, de };

export function stringsOf(locale: StatusLocale): LocaleStrings {
  return STRINGS[locale];
}

export function isStatusLocale(s: string): s is StatusLocale {
  return (STATUS_LOCALES as readonly string[]).includes(s);
}

/** Fills `{name}` placeholders; an unknown one stays as written (a typo shows, it does not throw). */
export function fill(template: string, values: Record<string, string | number>): string {
  return template.replace(/\{(\w+)\}/g, (m, k: string) => (k in values ? String(values[k]) : m));
}

/**
 * The locale a request reads the page in: `?locale=` when it names a supported one, else the
 * best supported language of Accept-Language (by q, then order), else the page's own locale.
 * Only the primary subtag counts (`de-AT` reads German); `*` means the page's locale.
 */
export function negotiateLocale(query: unknown, acceptLanguage: string | undefined, pageLocale: string): StatusLocale {
  if (typeof query === 'string' && isStatusLocale(query)) return query;
  const fallback: StatusLocale = isStatusLocale(pageLocale) ? pageLocale : 'en';
  if (!acceptLanguage) return fallback;
  let best: StatusLocale | null = null;
  let bestQ = 0;
  // A header is at most a few tags; a hostile one is cut so the parse stays cheap.
  for (const part of acceptLanguage.slice(0, 512).split(',')) {
    const [tag = '', ...params] = part.trim().split(';');
    let q = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/.exec(p);
      if (m) q = Number(m[1]);
    }
    if (!(q > 0) || q <= bestQ) continue;
    const primary = tag.trim().toLowerCase().split('-')[0] ?? '';
    const pick = primary === '*' ? fallback : isStatusLocale(primary) ? primary : null;
    if (pick !== null) {
      best = pick;
      bestQ = q;
    }
  }
  return best ?? fallback;
}

/** Dates and times in the page's time zone, for one locale; formatters are built once per pair. */
export class TimeFormat {
  private readonly dateTime: Intl.DateTimeFormat;
  private readonly date: Intl.DateTimeFormat;
  private readonly dayParts: Intl.DateTimeFormat;
  private readonly utc: Intl.DateTimeFormat;
  private readonly monthFormat: Intl.DateTimeFormat;
  private readonly timeOnly: Intl.DateTimeFormat;

  constructor(
    readonly locale: StatusLocale,
    readonly timeZone: string,
  ) {
    const zone = safeZone(timeZone);
    this.dateTime = new Intl.DateTimeFormat(locale, {
      year: 'numeric',
      month: 'short',
      day: 'numeric',
      hour: 'numeric',
      minute: '2-digit',
      timeZone: zone,
      timeZoneName: 'short',
    });
    this.date = new Intl.DateTimeFormat(locale, { year: 'numeric', month: 'short', day: 'numeric', timeZone: zone });
    this.monthFormat = new Intl.DateTimeFormat(locale, { year: 'numeric', month: 'long', timeZone: zone });
    this.timeOnly = new Intl.DateTimeFormat(locale, {
      hour: 'numeric',
      minute: '2-digit',
      timeZone: zone,
      timeZoneName: 'short',
    });
    this.dayParts = new Intl.DateTimeFormat('en-US', {
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
      timeZone: zone,
    });
    this.utc = new Intl.DateTimeFormat('en-GB', {
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      timeZone: 'UTC',
    });
  }

  /** What a <time> element shows: local text, the UTC instant, and a UTC tooltip. */
  time(isoString: string): { text: string; iso: string; utc: string } {
    const d = new Date(isoString);
    return { text: this.dateTime.format(d), iso: d.toISOString(), utc: `${this.utcText(d)} UTC` };
  }

  /** The local time of day only, with the zone ("8:50 PM GMT+1"). */
  timeText(isoString: string): string {
    return this.timeOnly.format(new Date(isoString));
  }

  /** Whether two instants fall on the same local calendar day. */
  sameDay(a: string, b: string): boolean {
    return this.startOfDay(Date.parse(a)) === this.startOfDay(Date.parse(b));
  }

  dateText(ms: number): string {
    return this.date.format(new Date(ms));
  }

  /** "November 2026" of the local month that holds `ms`, and a key (`2026-11`) for it. */
  month(ms: number): { key: string; label: string } {
    const label = this.monthFormat.format(new Date(ms));
    const local = new Date(ms + this.offsetMs(ms));
    return { key: `${local.getUTCFullYear()}-${String(local.getUTCMonth() + 1).padStart(2, '0')}`, label };
  }

  private utcText(d: Date): string {
    // en-GB gives "27/11/2026, 17:50": rearranged to the unambiguous 2026-11-27 17:50.
    const m = /^(\d\d)\/(\d\d)\/(\d{4}),? (\d\d:\d\d)$/.exec(this.utc.format(d));
    return m ? `${m[3]}-${m[2]}-${m[1]} ${m[4]}` : d.toISOString().slice(0, 16).replace('T', ' ');
  }

  /** The time zone's offset from UTC at `ms`, in ms (positive east of Greenwich). */
  offsetMs(ms: number): number {
    const p: Record<string, number> = {};
    for (const part of this.dayParts.formatToParts(new Date(ms))) {
      if (part.type !== 'literal') p[part.type] = Number(part.value);
    }
    const asUtc = Date.UTC(p.year!, p.month! - 1, p.day, p.hour! % 24, p.minute, p.second);
    return asUtc - Math.floor(ms / 1000) * 1000;
  }

  /** The start (UTC ms) of the local calendar day that contains `ms`. */
  startOfDay(ms: number): number {
    const local = ms + this.offsetMs(ms);
    const midnightLocal = local - (((local % DAY_MS) + DAY_MS) % DAY_MS);
    // The offset at midnight may differ from the one at `ms` (a DST switch that day).
    return midnightLocal - this.offsetMs(midnightLocal - this.offsetMs(ms));
  }
}

export const DAY_MS = 86_400_000;

/** A zone Intl does not know (the connection validates it; a stale record might not) reads as UTC. */
function safeZone(zone: string): string {
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone });
    return zone;
  } catch {
    return 'UTC';
  }
}
