import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { pagingFlags } from '../../cli/flags.js';
import { formatTable } from '../../cli/output.js';
import { listAuditPage, type AuditEntry } from '../../lib/audit.js';
import { escapeInvisible, parseTimestamp } from '../../lib/validate.js';

export default class AuditList extends BaseCommand<typeof AuditList> {
  static override description = 'List audit log entries, newest first.';
  static override examples = [
    '<%= config.bin %> audit list --entity-type license --since 2026-11-01',
    '<%= config.bin %> audit list --action license.created --json',
  ];
  static override flags = {
    action: Flags.string({ description: 'Only this action, e.g. license.created.' }),
    actor: Flags.string({ description: 'Only this actor, e.g. cli:alice or token:deploy.' }),
    'entity-type': Flags.string({ description: 'Only this kind of record, e.g. license.' }),
    'entity-id': Flags.string({ description: 'Only entries about this record id.' }),
    since: Flags.string({ description: 'Entries at or after this date or timestamp.' }),
    until: Flags.string({ description: 'Entries before this date or timestamp.' }),
    ...pagingFlags,
  };

  async run(): Promise<AuditEntry[]> {
    const { flags } = this;
    const filter = {
      action: flags.action,
      actor: flags.actor,
      entityType: flags['entity-type'],
      entityId: flags['entity-id'],
      since: flags.since === undefined ? undefined : parseTimestamp(flags.since, '--since'),
      until: flags.until === undefined ? undefined : parseTimestamp(flags.until, '--until'),
      limit: flags.limit,
      offset: flags.offset,
      cursor: flags.cursor,
    };
    const { items: entries, next_cursor } = await this.withDatabase((db) => listAuditPage(db, filter));
    this.say(
      formatTable(entries, [
        { header: 'ID', value: (e) => e.id },
        { header: 'WHEN', value: (e) => e.occurred_at },
        { header: 'ACTOR', value: (e) => escapeInvisible(e.actor) },
        { header: 'ACTION', value: (e) => e.action },
        { header: 'ENTITY', value: (e) => (e.entity_id ? `${e.entity_type} ${e.entity_id}` : e.entity_type) },
        // Hardware IDs and token names are compared byte for byte: every byte of them shows.
        { header: 'DETAILS', value: (e) => (Object.keys(e.details).length ? escapeInvisible(JSON.stringify(e.details)) : '-') },
      ]),
    );
    this.sayNextPage(next_cursor);
    return entries;
  }
}
