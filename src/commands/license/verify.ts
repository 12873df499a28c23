import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { payloadForOutput } from '../../cli/license-output.js';
import { formatRecord } from '../../cli/output.js';
import { readLicenseFileArgument, readPublicKeyFile, storedPublicKey } from '../../cli/public-key.js';
import { readMachinePrivateKeyFile } from '../../cli/machine-private-key.js';
import { LicenseServerError } from '../../lib/errors.js';
import type { LicenseFilePayload } from '../../lib/offline/format.js';
import { verifyLicenseFile } from '../../lib/offline/verify.js';

interface VerifyReport {
  valid: true;
  /** True when the file is unbound or bound to the --hardware-id given. */
  hardware_checked: boolean;
  /** True when --skip-hardware-check left the binding of a bound file unchecked. */
  hardware_check_skipped: boolean;
  decryption_key_unsealed: boolean;
  license: LicenseFilePayload;
}

export default class LicenseVerify extends BaseCommand<typeof LicenseVerify> {
  static override description = `Verify a .lic file offline: signature, validity window and hardware binding.
Exits 0 only for a valid file; otherwise prints the reason (signature verification failed, license expired, license not yet valid, hardware ID mismatch, failed to decrypt license key) and exits non-zero. A file that carries a decryption key is sealed to one machine, so its binding must be checked: without --hardware-id it is refused (HARDWARE_ID_REQUIRED) unless --skip-hardware-check says to check only the signature and the validity window.`;
  static override examples = [
    '<%= config.bin %> license verify license.lic --public-key signing-key.pem --hardware-id "$HWID"',
    '<%= config.bin %> license verify license.lic --public-key signing-key.pem --skip-hardware-check',
  ];
  static override args = { file: Args.string({ description: 'The .lic file.', required: true }) };
  static override flags = {
    'public-key': Flags.string({ description: 'PEM file of the server\'s public key (default: the key in the configured store).' }),
    'hardware-id': Flags.string({ description: 'This machine\'s hardware ID; checks the binding and unseals the decryption key.' }),
    'skip-hardware-check': Flags.boolean({
      description: 'Do not check the hardware binding (required to verify a file with a decryption key without --hardware-id); the output says it was not checked.',
      default: false,
      exclusive: ['hardware-id'],
    }),
    'machine-private-key': Flags.string({
      description: 'File holding the machine\'s X25519 private key (machine-key binding): it opens the decryption key of a version 2 file with machine_key, which nothing in the file opens.',
    }),
  };

  async run(): Promise<VerifyReport> {
    const { flags } = this;
    const file = readLicenseFileArgument(this.args.file);
    // Not the checkout's rules (parseHardwareId): a file may be bound to any hardware_id a reader
    // accepts (docs/offline-license-format.md section 3), 512 bytes of UTF-8 or a control character
    // included, and the machine it names must be able to verify it.
    const hardwareId = flags['hardware-id'];
    if (hardwareId === '') throw new LicenseServerError('INVALID_HARDWARE_ID', '--hardware-id must not be empty');
    const publicKey = flags['public-key'] ? readPublicKeyFile(flags['public-key']) : await storedPublicKey(await this.resolveConfig());
    if (!publicKey) throw new LicenseServerError('SIGNING_KEY_MISSING', 'no signing key is stored here to verify with');
    const skipped = flags['skip-hardware-check'];
    const machinePrivateKey = flags['machine-private-key'] === undefined ? undefined : readMachinePrivateKeyFile(flags['machine-private-key']);
    const verified = verifyLicenseFile(file, { publicKey, hardwareId, skipHardwareCheck: skipped, ...(machinePrivateKey ? { machinePrivateKey } : {}) });
    machinePrivateKey?.fill(0);
    const payload = payloadForOutput(verified.payload);
    const bound = payload.hardware_id !== '';
    const binding = !bound
      ? 'not bound to a machine'
      : verified.hardwareChecked ? `bound to ${JSON.stringify(payload.hardware_id)}, which matches`
      : `bound to ${JSON.stringify(payload.hardware_id)}, NOT checked (${skipped ? '--skip-hardware-check' : 'pass --hardware-id'})`;
    const unchecked = bound && !verified.hardwareChecked ? '; hardware binding NOT checked' : '';
    this.say(`valid: signature verified, valid until ${payload.valid_until}${unchecked}`);
    this.say(formatRecord([
      ['license', `${payload.license_id} (${payload.license_key_prefix}...), ${payload.license_type}`],
      ['customer', payload.customer_name],
      ['hardware', binding],
      ['entitlements', payload.entitlements.map((e) => (e.usage_limit === null ? e.code : `${e.code} (limit ${e.usage_limit})`)).join(', ') || '-'],
      ...(payload.request_nonce === undefined ? [] : [['request nonce', `${payload.request_nonce} (the file answers the activation request with this nonce)`] as const]),
      ['decryption key', payload.encrypted_key === undefined ? 'none' : verified.decryptionKey ? `unsealed for this ${payload.machine_key === undefined ? 'hardware ID' : 'machine key'}` : 'sealed, not unsealed (--skip-hardware-check)'],
    ]));
    return {
      valid: true,
      hardware_checked: verified.hardwareChecked,
      hardware_check_skipped: bound && !verified.hardwareChecked && skipped,
      decryption_key_unsealed: verified.decryptionKey !== undefined,
      license: payload,
    };
  }
}
