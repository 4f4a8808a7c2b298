import { maintenanceWire, type MaintenanceWire, type StoredMaintenance } from '../../domain/maintenance/maintenance.js';

/** What goes on the wire: the record without its revision (that is the ETag). */
export function presentMaintenance(m: StoredMaintenance): MaintenanceWire {
  return maintenanceWire(m);
}
