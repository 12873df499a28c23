import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { payloadForOutput } from '../../cli/license-output.js';
import { formatRecord } from '../../cli/output.js';
import { readLicenseFileArgument, readPublicKeyFile, storedPublicKey } from '../../cli/public-key.js';
import { decodeLicenseFile, type LicenseFilePayload } from '../../lib/offline/format.js';
import { checkValidityWindow, signatureStatus, type SignatureStatus } from '../../lib/offline/verify.js';
import { isLicenseServerError } from '../../lib/errors.js';

type WindowStatus = 'valid' | 'expired' | 'not_yet_valid';

export default class LicenseInspect extends BaseCommand<typeof LicenseInspect> {
  static override description = `Show what a .lic file holds, with its signature status, without the private key.
The signature is checked with --public-key, or with the key of the configured store, which must then exist (DATABASE_NOT_FOUND); a store without a signing key leaves it unchecked.`;
  static override args = { file: Args.string({ description: 'The .lic file.', required: true }) };
  static override flags = {
    'public-key': Flags.string({ description: 'PEM file of the server\'s public key.' }),
  };

  async run(): Promise<LicenseFilePayload & { signature: SignatureStatus; window: WindowStatus }> {
    const file = readLicenseFileArgument(this.args.file);
    const decoded = decodeLicenseFile(file);
    const payload = payloadForOutput(decoded.payload);
    const publicKey = this.flags['public-key'] ? readPublicKeyFile(this.flags['public-key']) : await storedPublicKey(await this.resolveConfig());
    const signature = signatureStatus(file, publicKey);
    const window = windowStatus(decoded.payload);
    this.say(formatRecord([
      ['signature', signature === 'unchecked' ? 'unchecked (no public key; pass --public-key)' : signature],
      ['window', window.replace(/_/g, ' ')],
      ['version', payload.version],
      ['license id', payload.license_id],
      ['key prefix', payload.license_key_prefix],
      ['customer', payload.customer_name],
      ['type', payload.license_type],
      ['valid from', payload.valid_from],
      ['valid until', payload.valid_until],
      ['hardware id', payload.hardware_id || '(not bound)'],
      ['entitlements', payload.entitlements.map((e) => (e.usage_limit === null ? e.code : `${e.code} (limit ${e.usage_limit})`)).join(', ') || '-'],
      ...(payload.machine_key === undefined ? [] : [['machine key', payload.machine_key] as const]),
      ['encrypted key', payload.encrypted_key === undefined ? 'no' : payload.machine_key === undefined ? 'yes (sealed to the hardware id)' : 'yes (sealed to the machine key; only its private key opens it)'],
      ...(payload.request_nonce === undefined ? [] : [['request nonce', payload.request_nonce] as const]),
      ['issued at', payload.issued_at],
      ['issuer', payload.issuer],
    ]));
    return { ...payload, signature, window };
  }
}

function windowStatus(payload: LicenseFilePayload): WindowStatus {
  try {
    checkValidityWindow(payload, new Date());
    return 'valid';
  } catch (error) {
    if (isLicenseServerError(error) && error.code === 'LICENSE_NOT_YET_VALID') return 'not_yet_valid';
    return 'expired';
  }
}
