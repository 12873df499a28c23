import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { findSigningKey, listVerifyingKeys, signingKeyMissing } from '../../lib/signing-keys/keys.js';

interface ShownKey {
  key_id: string;
  state: string;
  public_key_pem: string;
  fingerprint: string;
  created_at: string;
}

export default class SigningKeyShow extends BaseCommand<typeof SigningKeyShow> {
  static override description =
    'Print the active public signing key as PEM (--all: the key set of every key that verifies). Clients verify .lic files and grace tokens with it. Never generates a key: `init` and `serve` do.';
  static override examples = [
    '<%= config.bin %> signing-key show > signing-key.pem',
    '<%= config.bin %> signing-key show --all > key-set.pem',
  ];
  static override flags = {
    all: Flags.boolean({ description: 'Every key that verifies (active first, then the next and verify-only ones), each PEM block after a "# key_id ... state" line.', default: false }),
  };

  async run(): Promise<ShownKey | ShownKey[]> {
    const keys = await this.withDatabase(async (db) => {
      if (this.flags.all) return listVerifyingKeys(db);
      const active = await findSigningKey(db);
      return active ? [active] : [];
    });
    if (keys.length === 0) throw signingKeyMissing();
    const shown = keys.map(({ key_id, state, public_key_pem, fingerprint, created_at }) => ({ key_id, state, public_key_pem, fingerprint, created_at }));
    if (!this.jsonEnabled()) {
      process.stdout.write(this.flags.all ? shown.map((key) => `# key_id ${key.key_id} ${key.state}\n${key.public_key_pem}`).join('') : shown[0]!.public_key_pem);
    }
    return this.flags.all ? shown : shown[0]!;
  }
}
