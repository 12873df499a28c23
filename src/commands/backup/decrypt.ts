import { open } from 'node:fs/promises';
import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { LicenseServerError } from '../../lib/errors.js';

export default class BackupDecrypt extends BaseCommand<typeof BackupDecrypt> {
  static override description = `Decrypt an encrypted backup file into the plain .tar.gz it wraps, for recovery by hand with tar (docs/backup-format.md).
Every chunk is authenticated before its bytes are written. The output is written as OUT.partial, fsynced and renamed to OUT only when the last chunk checks out: a damaged file stops with an error and leaves no output.`;
  static override examples = ['<%= config.bin %> backup decrypt 20261122T101500123Z-3f9a1c.backup.tar.gz.enc --out backup.tar.gz'];
  static override args = { file: Args.string({ description: 'The encrypted backup file.', required: true }) };
  static override flags = { out: Flags.string({ description: 'Where to write the .tar.gz (must not exist).', required: true }) };

  async run(): Promise<{ file: string; out: string }> {
    const config = await this.resolveConfig();
    const [{ DecryptStream, sniff }, { writeStreamDurably }, { createReadStream }] = await Promise.all([
      import('../../lib/backup/archive/encryption.js'),
      import('../../lib/files/durable-write.js'),
      import('node:fs'),
    ]);
    // Looked at before the key is asked for: a backup made without one needs neither.
    if (sniff(await readStart(this.args.file)) === 'gzip') {
      throw new LicenseServerError('INVALID_INPUT', `${this.args.file} is not encrypted: it is a plain .tar.gz backup already`, {
        hint: `Open it with tar -xzf; only an encrypted backup (.enc) needs \`backup decrypt\`.`,
      });
    }
    const key = config.settings.backup.encryptionKey;
    if (!key) throw new LicenseServerError('BACKUP_KEY_REQUIRED', 'set backup.encryption_key (LICENSE_BACKUP_ENCRYPTION_KEY) to the key the backup was made with');
    try {
      await writeStreamDurably(this.flags.out, createReadStream(this.args.file), [new DecryptStream(key)], { mode: 0o600 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new LicenseServerError('BACKUP_NOT_FOUND', `cannot open ${this.args.file}`);
      throw error;
    }
    this.say(`decrypted ${this.args.file} into ${this.flags.out}; open it with tar -xzf`);
    return { file: this.args.file, out: this.flags.out };
  }
}

/** The first bytes of the file, which tell an encrypted backup from a plain one. */
async function readStart(file: string): Promise<Buffer> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new LicenseServerError('BACKUP_NOT_FOUND', `cannot open ${file}`);
    throw error;
  }
  try {
    const start = Buffer.alloc(4);
    const { bytesRead } = await handle.read(start, 0, start.length, 0);
    return start.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}
