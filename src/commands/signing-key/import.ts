import { readFileSync } from 'node:fs';
import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { readPassphrase } from '../../cli/passphrase.js';
import { LicenseServerError } from '../../lib/errors.js';
import { describeFsError } from '../../lib/fs-errors.js';
import type { SigningKeyInfo } from '../../lib/signing-keys/keys.js';

export default class SigningKeyImport extends BaseCommand<typeof SigningKeyImport> {
  static override description = `Bring back a private signing key from an escrow file (\`signing-key export\`, or any encrypted PKCS#8 Ed25519 key). It verifies from then on; with --activate it also becomes the active signer (the active key turns verify-only). Audited.`;
  static override args = { file: Args.string({ description: 'The encrypted PKCS#8 PEM file.', required: true }) };
  static override flags = {
    'passphrase-file': Flags.string({ description: 'Read the passphrase from the first line of this file instead of asking on the terminal.' }),
    activate: Flags.boolean({ description: 'Make it the active signing key.', default: false }),
    'files-without-key-id': Flags.boolean({
      description: 'Files it signs omit key_id, as a store\'s first key does: for a key whose clients were built before key ids.',
      default: false,
    }),
  };

  async run(): Promise<SigningKeyInfo> {
    let pem: string;
    try {
      pem = readFileSync(this.args.file, 'utf8');
    } catch (error) {
      throw new LicenseServerError('FILE_UNREADABLE', `cannot read ${this.args.file}: ${describeFsError(error)}`);
    }
    const passphrase = await readPassphrase({ file: this.flags['passphrase-file'], confirm: false, json: this.jsonEnabled() });
    const { decryptPrivateKey, importSigningKey } = await import('../../lib/signing-keys/escrow.js');
    const secretKey = decryptPrivateKey(pem, passphrase, this.args.file);
    const key = await this.withDatabase((db) =>
      importSigningKey(db, secretKey, { activate: this.flags.activate, keyIdInFiles: !this.flags['files-without-key-id'] }, this.operationContext()),
    );
    this.say(`Imported signing key ${key.key_id} (${key.state}).`);
    return key;
  }
}
