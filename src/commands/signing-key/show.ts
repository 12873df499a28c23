import { BaseCommand } from '../../cli/base-command.js';
import { findSigningKey, signingKeyMissing } from '../../lib/signing-keys/keys.js';

export default class SigningKeyShow extends BaseCommand<typeof SigningKeyShow> {
  static override description =
    'Print the public signing key as PEM. Clients verify .lic files with it. Never generates a key: `init` and `serve` do.';
  static override examples = ['<%= config.bin %> signing-key show > signing-key.pem'];

  async run(): Promise<{ public_key_pem: string; fingerprint: string; created_at: string }> {
    const key = await this.withDatabase((db) => findSigningKey(db));
    if (!key) throw signingKeyMissing();
    if (!this.jsonEnabled()) process.stdout.write(key.public_key_pem);
    return { public_key_pem: key.public_key_pem, fingerprint: key.fingerprint, created_at: key.created_at };
  }
}
