import { readFileSync } from 'node:fs';
import { LicenseServerError } from '../lib/errors.js';
import { describeFsError } from '../lib/fs-errors.js';

/** Shorter passphrases are refused for new escrow files; PBKDF2 cannot make up for them. */
export const MIN_PASSPHRASE_LENGTH = 12;

/**
 * The passphrase of an escrow file: the first line of --passphrase-file (its line end
 * dropped), or typed on a terminal without echo (twice when `confirm`, for a new file).
 * A script without either gets PASSPHRASE_REQUIRED rather than a prompt that would hang.
 */
export async function readPassphrase(options: { file: string | undefined; confirm: boolean; json: boolean }): Promise<string> {
  let passphrase: string;
  if (options.file !== undefined) {
    let text: string;
    try {
      text = readFileSync(options.file, 'utf8');
    } catch (error) {
      throw new LicenseServerError('FILE_UNREADABLE', `cannot read the passphrase file ${options.file}: ${describeFsError(error)}`);
    }
    passphrase = text.split(/\r?\n/)[0] ?? '';
  } else {
    if (!process.stdin.isTTY || !process.stderr.isTTY || options.json) {
      throw new LicenseServerError('PASSPHRASE_REQUIRED', 'a passphrase is needed and there is no terminal to ask on');
    }
    const { default: inquirer } = await import('inquirer');
    const questions = [{ type: 'password' as const, name: 'first', message: 'Passphrase', mask: '*' }];
    if (options.confirm) questions.push({ type: 'password' as const, name: 'second', message: 'Passphrase again', mask: '*' });
    const answers = await inquirer.prompt(questions, undefined);
    if (options.confirm && answers.first !== answers.second) {
      throw new LicenseServerError('PASSPHRASE_REQUIRED', 'the two passphrases differ', { hint: 'Type the same passphrase twice.' });
    }
    passphrase = String(answers.first);
  }
  // The table's hint ("pass --passphrase-file") is for a missing passphrase; one that was
  // given but refused needs to be told where to fix it.
  const fix = (what: string) => ({
    hint: options.file === undefined ? `Type ${what}.` : `Write ${what} on the first line of ${options.file}.`,
  });
  if (passphrase === '') throw new LicenseServerError('PASSPHRASE_REQUIRED', 'the passphrase is empty', fix('the passphrase'));
  if (options.confirm && [...passphrase].length < MIN_PASSPHRASE_LENGTH) {
    throw new LicenseServerError(
      'PASSPHRASE_REQUIRED',
      `the passphrase has fewer than ${MIN_PASSPHRASE_LENGTH} characters`,
      fix(`a passphrase of at least ${MIN_PASSPHRASE_LENGTH} characters`),
    );
  }
  return passphrase;
}
