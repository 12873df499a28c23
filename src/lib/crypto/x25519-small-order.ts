/**
 * The 32-byte encodings of the X25519 points of small order (RFC 7748 section 7), as
 * libsodium's blacklist and Wycheproof's x25519 vectors list them: u = 0, 1, the two
 * u-coordinates of order 8, p - 1, and p and p + 1 (which X25519 reduces to 0 and 1).
 * X25519 of any private key with one of them is all zeros (RFC 9180 section 7.1.4 then
 * refuses the DH), so no key pair has one as its public key. Kept apart from hpke.ts: a
 * reader of activation requests checks a machine key without loading the ciphers.
 */
export const SMALL_ORDER_POINTS: readonly string[] = [
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0100000000000000000000000000000000000000000000000000000000000000',
  'e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800',
  '5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
];

/**
 * Whether a 32-byte X25519 public key is a point of small order, compared with the top bit
 * of its last byte cleared, as RFC 7748 section 5 decodes a u-coordinate: with that bit set
 * it is the same point.
 */
export function isSmallOrderPoint(publicKey: Uint8Array): boolean {
  if (publicKey.length !== 32) return false;
  const masked = Buffer.from(publicKey);
  masked[31] = masked[31]! & 0x7f;
  return SMALL_ORDER_POINTS.includes(masked.toString('hex'));
}
