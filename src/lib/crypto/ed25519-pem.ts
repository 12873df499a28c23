/**
 * Ed25519 public keys as PEM "PUBLIC KEY" blocks: the DER SubjectPublicKeyInfo of RFC 8410
 * section 4 is a fixed 12-byte prefix followed by the 32 raw key bytes, so no ASN.1
 * library is needed. Free of server imports: the client library uses it too.
 */
const SPKI_PREFIX = Uint8Array.from([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]);

export function publicKeyToPem(publicKey: Uint8Array): string {
  if (publicKey.length !== 32) throw new TypeError(`ed25519 public key: expected 32 bytes, got ${publicKey.length}`);
  const der = Buffer.concat([SPKI_PREFIX, publicKey]);
  const lines = der.toString('base64').match(/.{1,64}/g)!;
  return `-----BEGIN PUBLIC KEY-----\n${lines.join('\n')}\n-----END PUBLIC KEY-----\n`;
}

/** The 32 raw key bytes of a PEM or DER SubjectPublicKeyInfo holding an Ed25519 key. */
export function publicKeyFromPem(pem: string | Uint8Array): Uint8Array {
  let der: Buffer;
  if (typeof pem === 'string') {
    const match = /-----BEGIN PUBLIC KEY-----([A-Za-z0-9+/=\s]+)-----END PUBLIC KEY-----/.exec(pem);
    if (!match) throw new TypeError('ed25519 public key: expected a PEM "PUBLIC KEY" block');
    der = Buffer.from(match[1]!.replace(/\s+/g, ''), 'base64');
  } else {
    der = Buffer.from(pem);
  }
  if (der.length !== SPKI_PREFIX.length + 32 || !der.subarray(0, SPKI_PREFIX.length).equals(SPKI_PREFIX)) {
    throw new TypeError('ed25519 public key: not an Ed25519 SubjectPublicKeyInfo');
  }
  return new Uint8Array(der.subarray(SPKI_PREFIX.length));
}
