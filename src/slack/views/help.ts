import { section, context, type KnownBlock } from './block-kit.js';

/** The sub-commands of `/incident`, in the order help lists them. */
export const SUBCOMMANDS: readonly { usage: string; what: string }[] = [
  { usage: 'new [title]', what: 'Declare an incident (opens a form).' },
  { usage: 'list', what: 'Open incidents, newest first (only you see the list).' },
  { usage: 'show <id>', what: 'One incident, with its buttons.' },
  { usage: 'execute <id>', what: 'Fill in the template variables, preview and send to every connection.' },
  { usage: 'update <id>', what: 'Change the status or details.' },
  { usage: 'resolve <id>', what: 'Mark it resolved with a resolution summary.' },
  { usage: 'close <id>', what: 'Close it for good (after a confirmation).' },
  { usage: 'help', what: 'This message.' },
];

export function helpMessage(command = '/incident'): { text: string; blocks: KnownBlock[] } {
  const lines = SUBCOMMANDS.map((s) => `\`${command} ${s.usage}\` — ${s.what}`);
  return {
    text: `Herald: ${command} help`,
    blocks: [
      section(`*Herald* declares incidents and tells everyone who needs to know.\n\n${lines.join('\n')}`),
      context('Incident ids look like `inc_01J…`; `list` shows them. The App Home tab has the same buttons.'),
    ],
  };
}
