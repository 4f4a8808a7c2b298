import type { StatusSnapshot } from '../domain/status/public.js';
import { overallIndicator, type Indicator } from './model.js';

/**
 * The status badge (SVG) and the shields.io endpoint JSON. Both say the status in words; the
 * colour only repeats it. The badge's colours hold white text at 4.5:1 or more.
 */

const MESSAGE: Record<Indicator, string> = {
  none: 'operational',
  maintenance: 'maintenance',
  minor: 'degraded',
  major: 'partial outage',
  critical: 'major outage',
};

const COLOR: Record<Indicator, string> = {
  none: '#1a7f37',
  maintenance: '#0969da',
  minor: '#9a6700',
  major: '#bc4c00',
  critical: '#cf222e',
};

/** shields.io's endpoint schema: https://shields.io/badges/endpoint-badge */
export function shieldsJson(snap: StatusSnapshot): Record<string, unknown> {
  const i = overallIndicator(snap);
  return { schemaVersion: 1, label: 'status', message: MESSAGE[i], color: COLOR[i].slice(1) };
}

const escapeXml = (s: string) =>
  s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);

/** An approximate text width in px at 11 px Verdana-like type: enough to size the badge. */
const textWidth = (s: string) => Math.ceil(s.length * 6.6) + 10;

export function badgeSvg(snap: StatusSnapshot, title: string): string {
  const i = overallIndicator(snap);
  const label = 'status';
  const message = MESSAGE[i];
  const lw = textWidth(label);
  const mw = textWidth(message);
  const w = lw + mw;
  const text = escapeXml(`${title} status: ${message}`);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="20" role="img" aria-label="${text}">
<title>${text}</title>
<rect width="${lw}" height="20" fill="#444d56"/>
<rect x="${lw}" width="${mw}" height="20" fill="${COLOR[i]}"/>
<g fill="#fff" font-family="Verdana,DejaVu Sans,Geneva,sans-serif" font-size="11" text-anchor="middle">
<text x="${lw / 2}" y="14">${label}</text>
<text x="${lw + mw / 2}" y="14">${escapeXml(message)}</text>
</g>
</svg>
`;
}
