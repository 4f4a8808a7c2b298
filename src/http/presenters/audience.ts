import type { Audience, AudienceWire } from '../../domain/audience/audience.js';

/** What goes on the wire: the record without its revision (that is the ETag). */
export function presentAudience(a: Audience): AudienceWire {
  const { rev: _rev, ...wire } = a;
  return wire;
}
