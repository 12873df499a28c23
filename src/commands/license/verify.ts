import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.js';
import { formatRecord } from '../../cli/output.js';
import { readLicenseFileArgument, readPublicKeyFile, storedPublicKey } from '../../cli/public-key.js';
import { LicenseServerError } from '../../lib/errors.js';
import { parseHardwareId } from '../../lib/offline/binding.js';
import type { LicenseFilePayload } from '../../lib/offline/format.js';
import { verifyLicenseFile } from '../../lib/offline/verify.js';

interface VerifyReport {
  valid: true;
  hardware_checked: boolean;
  decryption_key_unsealed: boolean;
  license: LicenseFilePayload;
}

export default class LicenseVerify extends BaseCommand<typeof LicenseVerify> {
  static override description = `Verify a .lic file offline: signature, validity window and hardware binding.
Exits 0 only for a valid file; otherwise prints the reason (signature verification failed, license expired, license not yet valid, hardware ID mismatch, failed to decrypt license key) and exits non-zero.`;
  static override examples = [
    '<%= config.bin %> license verify license.lic --public-key signing-key.pem --hardware-id "$HWID"',
  ];
  static override args = { file: Args.string({ description: 'The .lic file.', required: true }) };
  static override flags = {
    'public-key': Flags.string({ description: 'PEM file of the server\'s public key (default: the key in the configured database).' }),
    'hardware-id': Flags.string({ description: 'This machine\'s hardware ID; checks the binding and unseals the decryption key.' }),
  };

  async run(): Promise<VerifyReport> {
    const { flags } = this;
    const file = readLicenseFileArgument(this.args.file);
    const hardwareId = flags['hardware-id'] === undefined ? undefined : parseHardwareId(flags['hardware-id']);
    const publicKey = flags['public-key'] ? readPublicKeyFile(flags['public-key']) : await storedPublicKey(await this.resolveConfig());
    if (!publicKey) throw new LicenseServerError('SIGNING_KEY_MISSING', 'no signing key is stored here to verify with');
    const verified = verifyLicenseFile(file, { publicKey, hardwareId });
    const { payload } = verified;
    const binding = payload.hardware_id === ''
      ? 'not bound to a machine'
      : verified.hardwareChecked ? `bound to ${JSON.stringify(payload.hardware_id)}, which matches`
      : `bound to ${JSON.stringify(payload.hardware_id)}, not checked (pass --hardware-id)`;
    this.say(`valid: signature verified, valid until ${payload.valid_until}`);
    this.say(formatRecord([
      ['license', `${payload.license_id} (${payload.license_key_prefix}...), ${payload.license_type}`],
      ['customer', payload.customer_name],
      ['hardware', binding],
      ['entitlements', payload.entitlements.map((e) => (e.usage_limit === null ? e.code : `${e.code} (limit ${e.usage_limit})`)).join(', ') || '-'],
      ['decryption key', payload.encrypted_key === undefined ? 'none' : verified.decryptionKey ? 'unsealed for this hardware ID' : 'sealed (pass --hardware-id)'],
    ]));
    return {
      valid: true,
      hardware_checked: verified.hardwareChecked,
      decryption_key_unsealed: verified.decryptionKey !== undefined,
      license: payload,
    };
  }
}
