import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { readPassphrase } from '../../cli/passphrase.js';
import { writeFileDurably } from '../../lib/files/durable-write.js';

export default class SigningKeyExport extends BaseCommand<typeof SigningKeyExport> {
  static override description = `Write a private signing key to a file for escrow: PKCS#8 encrypted with a passphrase (PBES2, PBKDF2-HMAC-SHA256 with 600,000 iterations, AES-256-CBC), PEM that \`openssl pkey\` opens. Audited.
Keep the file and its passphrase in different places; \`signing-key import\` brings the key back.`;
  static override examples = ['<%= config.bin %> signing-key export 21fe31dfa154a261 --out /mnt/safe/signing-key.p8 --passphrase-file /run/secrets/escrow'];
  static override args = { key_id: Args.string({ description: 'The key id (`signing-key list`).', required: true }) };
  static override flags = {
    out: Flags.string({ description: 'The file to write (0600; never replaced unless --force).', required: true }),
    'passphrase-file': Flags.string({ description: 'Read the passphrase (at least 12 characters) from the first line of this file instead of asking on the terminal.' }),
    force: Flags.boolean({ description: 'Replace an existing file.', default: false }),
  };

  async run(): Promise<{ key_id: string; file: string }> {
    const passphrase = await readPassphrase({ file: this.flags['passphrase-file'], confirm: true, json: this.jsonEnabled() });
    const { key, pem } = await this.withDatabase(async (db) => {
      const { exportSigningKey } = await import('../../lib/signing-keys/escrow.js');
      return exportSigningKey(db, this.args.key_id, passphrase, this.operationContext());
    });
    await writeFileDurably(this.flags.out, pem, { overwrite: this.flags.force, mode: 0o600 });
    this.say(`Wrote signing key ${key.key_id} (${key.state}), encrypted, to ${this.flags.out}.`);
    return { key_id: key.key_id, file: this.flags.out };
  }
}
