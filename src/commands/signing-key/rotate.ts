import { BaseCommand } from '../../cli/base-command.js';
import type { SigningKeyInfo } from '../../lib/signing-keys/keys.js';
import { rotateSigningKey } from '../../lib/signing-keys/rotation.js';

export default class SigningKeyRotate extends BaseCommand<typeof SigningKeyRotate> {
  static override description =
    'Make a new signing key the active one. The old key becomes verify-only: everything it signed keeps verifying until `signing-key retire`. Ship the new public key (`signing-key show --all`) to clients before their files are renewed.';

  async run(): Promise<{ previous: SigningKeyInfo; active: SigningKeyInfo }> {
    const result = await this.withDatabase((db) => rotateSigningKey(db, this.operationContext()));
    this.say(`Rotated: ${result.active.key_id} is the active signing key; ${result.previous.key_id} is verify-only.`);
    return result;
  }
}
