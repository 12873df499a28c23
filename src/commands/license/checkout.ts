import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import * as Args from '@oclif/core/args';
import * as Flags from '@oclif/core/flags';
import { BaseCommand } from '../../cli/base-command.js';
import { LicenseServerError } from '../../lib/errors.js';
import { describeFsError } from '../../lib/fs-errors.js';
import { checkoutLicense, type CheckoutResult } from '../../lib/offline/checkout.js';
import { checkoutToFile } from '../../lib/offline/checkout-file.js';
import { decodeActivationRequest } from '../../lib/offline/activation-request.js';

export default class LicenseCheckout extends BaseCommand<typeof LicenseCheckout> {
  static override description = `Check a license out to a signed .lic file for offline use.
The file is written as .partial, fsynced, renamed and the directory fsynced, then read back and verified before this reports success, so a USB stick holds a complete, valid file when the command returns.
A file that cannot be written (a full stick, a device gone) voids its checkout: the seat is not held for it, and license.checkout_voided is audited beside the checkout.
With --request, the file answers an activation request made on the machine (license-server-client request): it is bound to the request's hardware ID and carries its nonce (format version 2). The same request checked out again within its 7 days gives a new file for the same machine and seat.`;
  static override examples = [
    '<%= config.bin %> license checkout 7KQ2-M9XD-1RTV-... --ttl-days 90 --hardware-id "$HWID" --out /media/usb',
    '<%= config.bin %> license checkout <license-id> --ttl-days 30 --out - > license.lic',
    '<%= config.bin %> license checkout 7KQ2-M9XD-1RTV-... --ttl-days 90 --request /media/usb/activation-request.txt --out /media/usb',
  ];
  static override args = { license: Args.string({ description: 'License id (UUID) or license key.', required: true }) };
  static override flags = {
    'ttl-days': Flags.string({ description: 'Days the file stays valid, 1-365 (never past the license\'s own end).', required: true }),
    'hardware-id': Flags.string({ description: 'Bind the file to this machine (required for a license with a decryption key).', exclusive: ['request'] }),
    request: Flags.string({ description: 'An activation request file made on the machine: bind the file to the machine it names.', exclusive: ['hardware-id'] }),
    out: Flags.string({ description: 'File or existing directory to write to, or - for standard output (not with --json, which wants standard output too).', default: '.' }),
    force: Flags.boolean({ description: 'Replace an existing file.', default: false }),
  };

  async run(): Promise<CheckoutResult> {
    const { flags } = this;
    if (flags.out === '-' && this.jsonEnabled()) throw new LicenseServerError('USAGE', '--out - and --json both want standard output');
    // Decided before the checkout, so that a target we would refuse leaves no audit entry behind.
    const target = flags.out === '-' ? undefined : await resolveTarget(flags.out, flags.force);
    const ttlDays = /^-?\d+$/.test(flags['ttl-days']) ? Number(flags['ttl-days']) : flags['ttl-days'];
    const activationRequest = flags.request === undefined ? undefined : await readRequestFile(flags.request);
    // Refused here already when malformed, before the store is opened; the checkout reads it again.
    const answered = activationRequest === undefined ? undefined : decodeActivationRequest(activationRequest);
    const hardwareId = flags['hardware-id'];
    const request = { ttlDays, hardwareId, activationRequest };
    return this.withDatabase(async (db, config) => {
      const context = { ...this.operationContext(), issuer: config.settings.issuer, requestWindowDays: config.settings.offline.requestWindowDays };
      if (!target) {
        const result = await checkoutLicense(db, this.args.license, request, context);
        process.stdout.write(result.license_file);
        return result;
      }
      // A file that cannot be written voids its checkout: its seat is not held for nothing.
      const { file, ...result } = await checkoutToFile(db, this.args.license, request, { ...target, overwrite: flags.force }, context);
      const boundTo = answered?.hardware_id ?? hardwareId;
      const binding = boundTo === undefined ? 'not bound to a machine' : `bound to hardware ID ${JSON.stringify(boundTo)}`;
      const answering = answered === undefined ? '' : `, answering the activation request ${answered.nonce} of ${new Date(answered.created_at).toISOString()}`;
      this.say(`Wrote ${path.resolve(file)} (${result.license_file.length} bytes), read back and verified.`);
      this.say(`Valid until ${result.valid_until}, ${binding}${answering}.`);
      return result;
    });
  }
}

/** The request file's text; its form is checked by the checkout (ACTIVATION_REQUEST_MALFORMED). */
async function readRequestFile(file: string): Promise<string> {
  try {
    return await readFile(file, 'latin1');
  } catch (error) {
    throw new LicenseServerError('FILE_UNREADABLE', `cannot read the activation request ${file}: ${describeFsError(error)}`);
  }
}

/** An existing directory, or a file path whose directory exists and which may be (over)written. */
async function resolveTarget(out: string, force: boolean): Promise<{ path: string; directory: boolean }> {
  const kind = await pathKind(out);
  if (kind === 'directory') return { path: out, directory: true };
  // `/media/usb/` names a directory: one that is not there (a stick not mounted) is not a file name.
  if (/[\\/]$/.test(out)) throw new LicenseServerError('FILE_WRITE_FAILED', `cannot write to ${path.resolve(out)}: it is not an existing directory`);
  if (kind !== 'missing' && !force) throw new LicenseServerError('FILE_EXISTS', `${path.resolve(out)} already exists`);
  if ((await pathKind(path.dirname(path.resolve(out)))) !== 'directory') {
    throw new LicenseServerError('FILE_WRITE_FAILED', `cannot write ${path.resolve(out)}: its directory does not exist`);
  }
  return { path: out, directory: false };
}

async function pathKind(file: string): Promise<'directory' | 'other' | 'missing'> {
  try {
    return (await stat(file)).isDirectory() ? 'directory' : 'other';
  } catch {
    return 'missing';
  }
}
