import type { Incident } from '../../domain/incident/incident.js';
import { context, section, type KnownBlock } from './block-kit.js';
import { incidentLine } from './incident.js';

/** What `/incident list` shows: one line per open incident (the caller caps the count at 20). */
export function incidentListMessage(incidents: Incident[], more: boolean): { text: string; blocks: KnownBlock[] } {
  if (incidents.length === 0) {
    return { text: 'No open incidents.', blocks: [section(':sunny: No open incidents.')] };
  }
  const blocks: KnownBlock[] = [section(`*Open incidents* (${incidents.length}${more ? '+' : ''}, newest first)`)];
  // One section per incident keeps each well inside the 3,000-character limit.
  for (const i of incidents) blocks.push(section(incidentLine(i)));
  if (more) blocks.push(context('More are open: see the App Home tab or GET /v1/incidents.'));
  blocks.push(context('`/incident show <id>` for details and buttons.'));
  return { text: `${incidents.length} open incident(s)`, blocks };
}
