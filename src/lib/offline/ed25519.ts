import { ed25519 } from '@noble/curves/ed25519.js';

/**
 * Ed25519 (RFC 8032, pure variant, no context) through @noble/curves: the portable reference
 * that the client library and the test vectors use. The server signs with node:crypto for
 * speed (./signer.ts); Ed25519 is deterministic, and a test holds both to identical bytes.
 */
export function verifyEd25519(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  if (signature.length !== 64 || publicKey.length !== 32) return false;
  try {
    // zip215: false is RFC 8032's strict verification, the same rule OpenSSL and node:crypto apply.
    return ed25519.verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
}

export function signEd25519(message: Uint8Array, secretKey: Uint8Array): Uint8Array {
  return ed25519.sign(message, secretKey);
}

export function publicKeyOf(secretKey: Uint8Array): Uint8Array {
  return ed25519.getPublicKey(secretKey);
}
