import { randomBytes } from 'node:crypto';
import { x25519 } from '@noble/curves/ed25519.js';
import canonicalize from 'canonicalize';
import { ACTIVATION_REQUEST_BEGIN, ACTIVATION_REQUEST_END, encodeActivationRequest, licenseKeyDigest, type ActivationRequest } from '../../src/lib/offline/activation-request.js';

/**
 * An activation request as a machine makes it (src/client/activation.ts), for tests that
 * need one without a client: for `licenseKey` and `hardwareId`, made now, with `changes`.
 */
export function activationRequestFor(licenseKey: string, hardwareId: string, changes: Partial<ActivationRequest> = {}): { text: string; request: ActivationRequest } {
  const request: ActivationRequest = {
    format: 'license-server-activation-request',
    version: 1,
    license_key_prefix: licenseKey.slice(0, 8),
    license_key_digest: licenseKeyDigest(licenseKey),
    hardware_id: hardwareId,
    machine_name: 'bench 3',
    app_version: '4.2.0',
    machine_key: Buffer.from(x25519.getPublicKey(x25519.utils.randomSecretKey())).toString('base64url'),
    nonce: randomBytes(16).toString('base64url'),
    created_at: `${new Date().toISOString().slice(0, 19)}Z`,
    ...changes,
  };
  return { text: encodeActivationRequest(request), request };
}

/**
 * The text of a request as a writer lays it out, without the writer's own check: for
 * requests a reader must refuse (encodeActivationRequest refuses to write them).
 */
export function uncheckedRequestText(request: ActivationRequest): string {
  const base64 = Buffer.from(canonicalize(request)!, 'utf8').toString('base64');
  return `${ACTIVATION_REQUEST_BEGIN}\n${base64.match(/.{1,64}/g)!.join('\n')}\n${ACTIVATION_REQUEST_END}\n`;
}
