import type { Core } from '../composition/cli.js';
import type { Output } from './keys.js';

/** `herald secrets reseal`: prints what was checked and resealed; unreadable records fail the command. */
export async function resealSecrets(core: Pick<Core, 'resealSecrets'>, json: boolean, io: Output): Promise<void> {
  const report = await core.resealSecrets();
  if (json) io.out(`${JSON.stringify(report)}\n`);
  else io.out(`Checked ${report.checked} sealed records; resealed ${report.resealed} with the current key.\n`);
  if (report.unreadable.length > 0) {
    throw new Error(
      `${report.unreadable.length} records could not be opened with HERALD_SECRET_KEY or HERALD_SECRET_KEY_PREVIOUS: ${report.unreadable.join(', ')}`,
    );
  }
}
