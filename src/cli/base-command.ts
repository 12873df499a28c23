import { userInfo } from 'node:os';
import type { Interfaces } from '@oclif/core';
import { Command } from '@oclif/core/command';
import * as Flags from '@oclif/core/flags';
import type { ResolvedConfig } from '../lib/config/resolve.js';
import type { OperationContext } from '../lib/context.js';
import { EXIT, isLicenseServerError, LicenseServerError } from '../lib/errors.js';
import type { Database } from '../lib/storage/types.js';
import { collectRaised } from './deliver-raised.js';
import { openExistingStore } from './store.js';
import { renderReport, type Reportable } from './report.js';
import { usageMessage } from './usage-message.js';

export type CommandFlags<T extends typeof Command> = Interfaces.InferredFlags<(typeof BaseCommand)['baseFlags'] & T['flags']>;
export type CommandArgs<T extends typeof Command> = Interfaces.InferredArgs<T['args']>;

/** Maps a command's flag names to the configuration keys they override. */
const FLAG_SETTINGS: Readonly<Record<string, string>> = {
  'data-dir': 'data_dir',
  'database-url': 'database.url',
  host: 'server.host',
  port: 'server.port',
  'tls-cert': 'server.tls_cert',
  'tls-key': 'server.tls_key',
};

/**
 * What every command shares: configuration, the database, the acting user, --json, and
 * one way of reporting errors (conventions section 3). Commands stay thin adapters.
 */
export abstract class BaseCommand<T extends typeof Command> extends Command {
  static override enableJsonFlag = true;

  static override baseFlags = {
    config: Flags.string({
      description: 'Path to config.yaml (default: LICENSE_CONFIG, then <data-dir>/config.yaml).',
      helpGroup: 'GLOBAL',
    }),
    'data-dir': Flags.string({ description: 'Data directory (default: LICENSE_DATA_DIR or ./data).', helpGroup: 'GLOBAL' }),
    'database-url': Flags.string({
      description: 'SQLite file or postgres:// URL (default: LICENSE_DATABASE_URL or <data-dir>/license-server.db).',
      helpGroup: 'GLOBAL',
    }),
  };

  protected flags!: CommandFlags<T>;
  protected args!: CommandArgs<T>;

  override async init(): Promise<void> {
    await super.init();
    const { args, flags } = await this.parse({
      flags: this.ctor.flags,
      baseFlags: (super.ctor as typeof BaseCommand).baseFlags,
      enableJsonFlag: this.ctor.enableJsonFlag,
      args: this.ctor.args,
      strict: this.ctor.strict,
    });
    this.flags = flags as CommandFlags<T>;
    this.args = args as CommandArgs<T>;
  }

  /** Settings from flags, LICENSE_* variables, config.yaml and defaults, in that order. */
  protected async resolveConfig(): Promise<ResolvedConfig> {
    const { resolveConfig } = await import('../lib/config/resolve.js');
    const flagValues: Record<string, string | number | boolean | undefined> = {};
    const flags = this.flags as Record<string, unknown>;
    for (const [flag, key] of Object.entries(FLAG_SETTINGS)) {
      const value = flags[flag];
      if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') flagValues[key] = value;
    }
    return resolveConfig({
      flags: flagValues,
      env: process.env,
      configPath: typeof flags.config === 'string' ? flags.config : undefined,
      cwd: process.cwd(),
    });
  }

  /**
   * Opens the configured database (migrating it), runs `work`, and always closes it. The
   * store must exist: only `serve` and `init` create one, so that a command run from the
   * wrong directory says so (DATABASE_NOT_FOUND) instead of starting an empty store there.
   */
  protected async withDatabase<R>(work: (db: Database, config: ResolvedConfig) => Promise<R>): Promise<R> {
    const config = await this.resolveConfig();
    const db = await openExistingStore(config);
    const raised = await collectRaised();
    try {
      return await work(db, config);
    } finally {
      // Also after a failure: a failed backup raised backup.failed.
      for (const warning of await raised.deliver(db, config)) process.stderr.write(`warning: ${warning}\n`);
      await db.close();
    }
  }

  /**
   * For a command that opens the store its own way (a restore): delivers what `work` raised,
   * as withDatabase does, through the store and configuration as they are afterwards.
   */
  protected async delivering<R>(work: () => Promise<R>): Promise<R> {
    const raised = await collectRaised();
    let result: R;
    try {
      result = await work();
    } catch (error) {
      raised.stop();
      throw error;
    }
    const config = await this.resolveConfig();
    const db = await openExistingStore(config);
    try {
      for (const warning of await raised.deliver(db, config)) process.stderr.write(`warning: ${warning}\n`);
    } finally {
      await db.close();
    }
    return result;
  }

  /** The audit log's "who" for this command line. */
  protected operationContext(): OperationContext {
    let user: string;
    try {
      user = userInfo().username;
    } catch {
      user = process.env.USER ?? 'unknown';
    }
    return { actor: `cli:${user}` };
  }

  /** Prints human text unless --json is on (then the returned data is the whole output). */
  protected say(text: string): void {
    if (!this.jsonEnabled()) this.log(text);
  }

  /**
   * What a create command prints (README, "Output for scripts"): the new record on a
   * terminal; anywhere else only what a script needs of it, alone on its line, so that
   * `id=$(license-server ... create ...)` works. --json prints the whole record instead.
   */
  protected sayCreated(onTerminal: string, forScripts: string): void {
    this.say(process.stdout.isTTY ? onTerminal : forScripts);
  }

  /**
   * A list's next page, on standard error even with --json: stdout keeps the list in its
   * documented form, and a script still learns the cursor to pass as --cursor.
   */
  protected sayNextPage(nextCursor: string | null): void {
    if (nextCursor !== null) process.stderr.write(`next page: --cursor ${nextCursor}\n`);
  }

  /** A warning on standard error, as one plain line (oclif's warn() wraps and decorates). */
  protected warnLine(text: string): void {
    this.logToStderr(`warning: ${text}`);
  }

  /**
   * Asks for a value the user did not pass, but only on a terminal: a script or cron job
   * gets a usage error naming the flag instead of a prompt that would hang.
   */
  protected async ask(value: string | undefined, flag: string, message: string): Promise<string> {
    if (value !== undefined) return value;
    if (!process.stdin.isTTY || !process.stdout.isTTY || this.jsonEnabled()) {
      throw new LicenseServerError('USAGE', `--${flag} is required`);
    }
    const { default: inquirer } = await import('inquirer');
    const answers = await inquirer.prompt([{ type: 'input', name: 'value', message }]);
    return String(answers.value);
  }

  override async catch(error: Interfaces.CommandError): Promise<unknown> {
    // this.exit() and --help/--version unwind with an ExitError: not a failure of ours.
    if ((error as { code?: string }).code === 'EEXIT') throw error;
    const flagNames = [...Object.keys({ ...this.ctor.baseFlags, ...this.ctor.flags }), ...(this.ctor.enableJsonFlag ? ['json'] : [])];
    const reported = toReportable(error, `${this.config.bin} ${this.id?.replace(/:/g, ' ') ?? ''}`.trim(), await flagSuggestions(error, flagNames));
    process.exitCode = reported.exitCode;
    const output = renderReport(reported, this.jsonEnabled());
    if (output.stdout) process.stdout.write(output.stdout);
    if (output.stderr) process.stderr.write(output.stderr);
    if (!output.stdout && reported.code === 'INTERNAL' && process.env.LICENSE_DEBUG && error.stack) this.logToStderr(error.stack);
    return undefined;
  }
}

function toReportable(error: Interfaces.CommandError, commandLine: string, suggestions: string): Reportable {
  if (isLicenseServerError(error)) {
    return { code: error.code, message: error.message, hint: error.hint, exitCode: error.exitCode };
  }
  // oclif's own parse errors (unknown flag, missing argument, bad option) are usage errors.
  if ((error as { oclif?: { exit?: number } }).oclif?.exit !== undefined) {
    const hint = `See \`${commandLine} --help\` for its arguments and flags.`;
    return { code: 'USAGE', message: usageMessage(error) + suggestions, hint, exitCode: EXIT.usage };
  }
  const internal = new LicenseServerError('INTERNAL', `unexpected internal error: ${firstLine(error.message)}`);
  return { code: internal.code, message: internal.message, hint: internal.hint, exitCode: EXIT.internal };
}

/** `; did you mean --limit?` for each unknown flag (oclif's NonExistentFlagsError) near a real one. */
async function flagSuggestions(error: Interfaces.CommandError, flagNames: readonly string[]): Promise<string> {
  const unknown = (error as { flags?: unknown }).flags;
  if (!Array.isArray(unknown)) return '';
  const { didYouMean } = await import('./did-you-mean.js');
  return unknown
    .map((flag) => /^--?([^=]+)/.exec(String(flag))?.[1])
    .map((name) => (name === undefined ? undefined : didYouMean(name, flagNames)))
    .filter((name): name is string => name !== undefined)
    .map((name) => `; did you mean --${name}?`)
    .join('');
}

function firstLine(message: string): string {
  return (message ?? '').split('\n')[0] ?? '';
}
