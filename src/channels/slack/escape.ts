import { breakMarkers, LINE_START, neutraliseMentions, ZWSP } from '../common/escape.js';

/**
 * Slack mrkdwn. `& < >` must be entities (Slack's own rule), which also makes `<!channel>`,
 * `<@U123>` and `<url|text>` inert; `* _ ~ \`` are broken with U+200B since mrkdwn has no
 * escape; a `>` starting a line would quote, so it gets a U+200B in front.
 */
export function escapeSlack(value: string): string {
  const entities = value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const quoted = breakMarkers(entities, '*_~`').replace(new RegExp(`${LINE_START.source}&gt;`, 'g'), `$1$2${ZWSP}&gt;`);
  return neutraliseMentions(quoted);
}
