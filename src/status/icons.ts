import type { ComponentStatus } from '../domain/status/public.js';
import type { Indicator } from './model.js';

/**
 * Status icons: a distinct shape per status (a check, a dash, a triangle, a cross, a wrench-like
 * clock), so the status reads without colour too; the text beside each icon says it in words.
 * Decorative for assistive technology (aria-hidden): the text is what is read.
 */
const svg = (body: string) =>
  `<svg class="icon" viewBox="0 0 16 16" width="16" height="16" aria-hidden="true" focusable="false">${body}</svg>`;

const CHECK = svg(
  '<circle cx="8" cy="8" r="7" fill="currentColor"/><path d="M4.5 8.2l2.3 2.3 4.7-4.9" fill="none" stroke="#fff" stroke-width="1.8"/>',
);
const DASH = svg(
  '<circle cx="8" cy="8" r="7" fill="currentColor"/><path d="M4.5 8h7" stroke="#fff" stroke-width="2"/>',
);
const TRIANGLE = svg(
  '<path d="M8 1l7.5 13.5H.5z" fill="currentColor"/><path d="M8 5.5v4.5M8 11.5v1.5" stroke="#fff" stroke-width="1.8"/>',
);
const CROSS = svg(
  '<circle cx="8" cy="8" r="7" fill="currentColor"/><path d="M5.2 5.2l5.6 5.6M10.8 5.2l-5.6 5.6" stroke="#fff" stroke-width="1.8"/>',
);
const CLOCK = svg(
  '<circle cx="8" cy="8" r="7" fill="currentColor"/><path d="M8 4v4.3l2.8 1.7" fill="none" stroke="#fff" stroke-width="1.6"/>',
);

export const STATUS_ICON: Record<ComponentStatus, string> = {
  operational: CHECK,
  under_maintenance: CLOCK,
  degraded_performance: DASH,
  partial_outage: TRIANGLE,
  major_outage: CROSS,
};

export const INDICATOR_ICON: Record<Indicator, string> = {
  none: CHECK,
  maintenance: CLOCK,
  minor: DASH,
  major: TRIANGLE,
  critical: CROSS,
};
