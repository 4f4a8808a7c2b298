import { breakMarkers, LINE_START, neutraliseMentions, ZWSP } from '../common/escape.js';

/**
 * Google Chat text markup (the syntax incoming webhooks use): like Slack it has no escape, so
 * `* _ ~ \`` are broken with U+200B; `<` gets a U+200B after it so `<users/all>` and
 * `<url|text>` are not parsed, and a `-` bullet at a line start gets one in front.
 */
export function escapeGoogleChat(value: string): string {
  const broken = breakMarkers(value, '*_~`')
    .replace(/</g, `<${ZWSP}`)
    .replace(new RegExp(`${LINE_START.source}-`, 'g'), `$1$2${ZWSP}-`);
  return neutraliseMentions(broken);
}
