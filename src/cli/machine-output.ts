import type { Machine } from '../lib/licensing/machines.js';
import { escapeInvisible } from '../lib/validate.js';
import { formatRecord, formatTable } from './output.js';

/** Hardware IDs and machine names come from clients: every invisible character in them shows escaped. */
export function formatMachines(machines: readonly Machine[]): string {
  return formatTable(machines, [
    { header: 'ID', value: (m) => m.id },
    { header: 'LICENSE', value: (m) => m.license_id },
    { header: 'HARDWARE ID', value: (m) => escapeInvisible(m.hardware_id) },
    { header: 'NAME', value: (m) => (m.name === null ? null : escapeInvisible(m.name)) },
    { header: 'ACTIVE', value: (m) => m.active },
    { header: 'SEAT', value: (m) => m.holds_seat },
    { header: 'LAST SEEN', value: (m) => m.last_seen },
    { header: 'VERSION', value: (m) => m.client_version },
    { header: 'LEASE UNTIL', value: (m) => m.lease_expires_at },
    { header: 'OFFLINE FILE UNTIL', value: (m) => m.offline_until },
  ]);
}

export function formatMachine(machine: Machine): string {
  return formatRecord([
    ['id', machine.id],
    ['license', machine.license_id],
    ['hardware id', escapeInvisible(machine.hardware_id)],
    ['name', machine.name === null ? null : escapeInvisible(machine.name)],
    ['client version', machine.client_version],
    ['active', machine.active],
    ['holds a seat', machine.holds_seat],
    ['first seen', machine.first_seen],
    ['last seen', machine.last_seen],
    ['lease until', machine.lease_expires_at],
    ['offline file until', machine.offline_until],
    ['deactivated', machine.deactivated_at],
  ]);
}
