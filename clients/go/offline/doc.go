// Package offline verifies what the license server signs for use without a network:
// the offline license file (.lic, format versions 1 and 2, docs/offline-license-format.md) and
// the grace token (an EdDSA JWT, docs/grace-token.md), with a key set of the server's
// Ed25519 public keys.
//
// It is a port of the TypeScript reference (src/lib/offline, src/lib/crypto/key-set.ts,
// src/lib/licensing/grace-token.ts) using the Go standard library only: strict Base64,
// a JSON parser that refuses repeated members, RFC 8785 canonical JSON (JCS) for the
// values the format uses, HKDF-SHA256 (RFC 5869), AES-256-GCM and crypto/ed25519, and for
// the machine-key binding of version 2 X25519 (RFC 7748, x25519.go) and HPKE (RFC 9180, hpke.go).
//
// Every failure is an *Error whose Code is the reference's error code
// (LICENSE_FILE_MALFORMED, SIGNATURE_INVALID, LICENSE_EXPIRED, HARDWARE_MISMATCH, ...) and
// whose message starts with the specification's text ("signature verification failed",
// "license expired", "hardware ID mismatch", "failed to decrypt license key", ...).
//
// Unicode normalisation: the standard library has no NFC. Hardware IDs are compared
// exactly; the server writes them in NFC, so a caller must pass its hardware ID in NFC
// (any ASCII ID already is).
package offline
