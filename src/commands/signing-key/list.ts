import { BaseCommand } from '../../cli/base-command.js';
import { pagingFlags } from '../../cli/flags.js';
import { formatTable } from '../../cli/output.js';
import { listSigningKeysPage, type SigningKeyInfo } from '../../lib/signing-keys/keys.js';

export default class SigningKeyList extends BaseCommand<typeof SigningKeyList> {
  static override description = 'List the signing keys: id, state (active, next, verify-only, retired), creation, fingerprint, and whether the private key is sealed.';

  static override flags = { ...pagingFlags };

  async run(): Promise<SigningKeyInfo[]> {
    const { limit, offset, cursor } = this.flags;
    const { items: keys, next_cursor } = await this.withDatabase((db) => listSigningKeysPage(db, { limit, offset, cursor }));
    this.say(
      formatTable(keys, [
        { header: 'KEY ID', value: (k) => k.key_id },
        { header: 'STATE', value: (k) => k.state },
        { header: 'CREATED', value: (k) => k.created_at },
        { header: 'DEACTIVATED', value: (k) => k.deactivated_at },
        { header: 'RETIRED', value: (k) => k.retired_at },
        { header: 'SEALED', value: (k) => k.sealed },
        { header: 'FINGERPRINT (SHA-256)', value: (k) => k.fingerprint },
      ]),
    );
    this.sayNextPage(next_cursor);
    return keys;
  }
}
