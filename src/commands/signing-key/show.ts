import { BaseCommand } from '../../cli/base-command.js';
import { ensureSigningKey, type SigningKeyInfo } from '../../lib/signing-key.js';

export default class SigningKeyShow extends BaseCommand<typeof SigningKeyShow> {
  static override description =
    'Print the public signing key as PEM (generating the key pair on first use). Clients verify .lic files with it.';
  static override examples = ['<%= config.bin %> signing-key show > signing-key.pem'];

  async run(): Promise<{ public_key_pem: string; fingerprint: string; created_at: string }> {
    const key: SigningKeyInfo = await this.withDatabase((db) => ensureSigningKey(db, this.operationContext()));
    if (!this.jsonEnabled()) process.stdout.write(key.public_key_pem);
    return { public_key_pem: key.public_key_pem, fingerprint: key.fingerprint, created_at: key.created_at };
  }
}
