import * as Args from '@oclif/core/args';
import type { Command } from '@oclif/core/command';
import * as Flags from '@oclif/core/flags';
import type { OperationContext } from '../lib/context.js';
import type { ImportOptions, ImportReport } from '../lib/import/run.js';
import type { Database } from '../lib/storage/types.js';
import { BaseCommand } from './base-command.js';
import { describeImport, readImportFile } from './import-output.js';
import { renderReport } from './report.js';

/** `customer import` and `license import`: a CSV file in, the core's report out. */
export abstract class ImportCommand<T extends typeof Command> extends BaseCommand<T> {
  static override args = { file: Args.string({ description: 'The CSV file (UTF-8, a header row naming the columns).', required: true }) };
  static override flags = {
    'dry-run': Flags.boolean({ description: 'Check every row and report each error by line; write nothing.', default: false }),
  };

  protected async runImport(
    importer: (db: Database, file: Uint8Array, options: ImportOptions, context: OperationContext) => Promise<ImportReport>,
    noun: string,
  ): Promise<ImportReport> {
    const { file } = this.args as { file: string };
    const { 'dry-run': dryRun } = this.flags as { 'dry-run': boolean };
    const bytes = readImportFile(file);
    const report = await this.withDatabase((db) => importer(db, bytes, { dryRun }, this.operationContext()));
    const { text, ids, failure } = describeImport(report, noun);
    if (failure || report.dry_run) this.say(text);
    else this.sayCreated(text, ids);
    // Rows that are not valid are what the command reports, not a failure of it: the report
    // (or with --json its JSON) stands, the error line follows on standard error.
    if (failure) {
      if (!this.jsonEnabled()) process.stderr.write(renderReport(failure, false).stderr!);
      process.exitCode = failure.exitCode;
    }
    return report;
  }
}
