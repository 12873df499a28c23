/**
 * Strict standard Base64 (RFC 4648 section 4, with padding). Node's decoder skips bad
 * characters and ignores the unused low bits of the last symbol, so two different texts can
 * decode to the same bytes; a signed format must not accept that, or a flipped bit in those
 * low bits would go unnoticed. Only the canonical encoding of the bytes is accepted.
 */
const STRICT = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export function decodeBase64Strict(text: string): Uint8Array | undefined {
  if (!STRICT.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64');
  if (bytes.toString('base64') !== text) return undefined;
  return new Uint8Array(bytes);
}

export function encodeBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}
