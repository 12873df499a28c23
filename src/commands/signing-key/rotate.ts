import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import type { SigningKeyInfo } from '../../lib/signing-keys/keys.js';
import { prepareSigningKey, rotateSigningKey } from '../../lib/signing-keys/rotation.js';

export default class SigningKeyRotate extends BaseCommand<typeof SigningKeyRotate> {
  static override description = `Make the next signing key (or a new one) the active one. The old key becomes verify-only: everything it signed keeps verifying until \`signing-key retire\`.
With --prepare, only make the next key: it joins the key set (\`signing-key show --all\`) without signing anything, so clients can ship it before the switch; a later \`rotate\` switches to it.`;
  static override examples = ['<%= config.bin %> signing-key rotate --prepare && <%= config.bin %> signing-key show --all > key-set.pem', '<%= config.bin %> signing-key rotate'];
  static override flags = {
    prepare: Flags.boolean({ description: 'Make the next key only (it verifies, it does not sign yet).', default: false }),
  };

  async run(): Promise<{ previous: SigningKeyInfo; active: SigningKeyInfo } | (SigningKeyInfo & { created: boolean })> {
    if (this.flags.prepare) {
      const next = await this.withDatabase((db) => prepareSigningKey(db, this.operationContext()));
      this.say(`${next.created ? 'Prepared' : 'Already prepared'}: ${next.key_id} is the next signing key; ship \`signing-key show --all\` to clients, then run \`signing-key rotate\`.`);
      return next;
    }
    const result = await this.withDatabase((db) => rotateSigningKey(db, this.operationContext()));
    this.say(`Rotated: ${result.active.key_id} is the active signing key; ${result.previous.key_id} is verify-only.`);
    return result;
  }
}
