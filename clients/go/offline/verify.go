package offline

import (
	"time"
)

// VerifyOptions are the inputs of VerifyLicenseFile besides the file.
type VerifyOptions struct {
	// Keys is the server's key set (ParseKeySet). A file naming a key_id is checked with
	// that key only; one without is tried against each key.
	Keys KeySet
	// HardwareID is this machine's hardware ID, in Unicode NFC. "" means none is given:
	// the binding of a bound file is then left unchecked, except for a file that carries
	// encrypted_key, which is refused with HARDWARE_ID_REQUIRED unless SkipHardwareCheck.
	HardwareID string
	// SkipHardwareCheck is the caller's explicit choice to check only the signature and
	// the window of a file with encrypted_key (without a HardwareID).
	SkipHardwareCheck bool
	// MachinePrivateKey is the machine's 32-byte X25519 private key, which opens the
	// decryption key of a file with machine_key (machine-key binding). Without it such a
	// file's key is not opened: MACHINE_KEY_MISSING.
	MachinePrivateKey []byte
	// Now is the time to check the window against; zero means time.Now().
	Now time.Time
}

// VerifiedLicenseFile is a file that passed verification.
type VerifiedLicenseFile struct {
	Payload Payload
	// HardwareChecked is true when the file is unbound, or bound to the hardware ID given.
	HardwareChecked bool
	// DecryptionKey is the license's 32-byte key, unsealed for the hardware ID given,
	// when the file carries one.
	DecryptionKey []byte
}

// VerifyLicenseFile performs the verification of docs/offline-license-format.md section
// 8, in its order, stopping at the first failure: decode strictly
// (LICENSE_FILE_MALFORMED, LICENSE_FILE_UNSUPPORTED_VERSION), the signature with the key
// its key_id names (SIGNATURE_INVALID, "signature verification failed"), the validity
// window (LICENSE_NOT_YET_VALID, LICENSE_EXPIRED), the hardware binding
// (HARDWARE_MISMATCH, HARDWARE_ID_REQUIRED) and the sealed key (DECRYPTION_FAILED).
// Every error is an *Error.
func VerifyLicenseFile(file []byte, opts VerifyOptions) (*VerifiedLicenseFile, error) {
	decoded, err := DecodeLicenseFile(file)
	if err != nil {
		return nil, err
	}
	payload := decoded.Payload
	if err := checkSignature(decoded, opts.Keys); err != nil {
		return nil, err
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	if err := CheckValidityWindow(payload.ValidFrom, payload.ValidUntil, now); err != nil {
		return nil, err
	}
	if payload.HardwareID == "" {
		return &VerifiedLicenseFile{Payload: payload, HardwareChecked: true}, nil
	}
	if opts.HardwareID == "" {
		if payload.EncryptedKey != "" && !opts.SkipHardwareCheck {
			return nil, newError(CodeHardwareIDRequired, "hardware ID required: the file is bound to %s and carries a decryption key sealed to it, so its binding must be checked", Quote(decoded.rawHardwareID))
		}
		return &VerifiedLicenseFile{Payload: payload}, nil
	}
	// The reference compares the NFC forms; the server writes NFC, and this package
	// expects the caller's ID in NFC (the standard library has no normaliser).
	if opts.HardwareID != decoded.rawHardwareID {
		if payload.EncryptedKey != "" {
			return nil, newError(CodeHardwareMismatch, "hardware ID mismatch: failed to decrypt license key")
		}
		return nil, newError(CodeHardwareMismatch, "hardware ID mismatch")
	}
	if payload.EncryptedKey == "" {
		return &VerifiedLicenseFile{Payload: payload, HardwareChecked: true}, nil
	}
	var key []byte
	if payload.MachineKey != "" {
		key, err = UnsealForMachine(payload.EncryptedKey, payload.MachineKey, payload.LicenseID, decoded.rawHardwareID, opts.MachinePrivateKey)
	} else {
		key, err = UnsealDecryptionKey(payload.EncryptedKey, decoded.rawHardwareID, payload.LicenseID)
	}
	if err != nil {
		return nil, err
	}
	return &VerifiedLicenseFile{Payload: payload, HardwareChecked: true, DecryptionKey: key}, nil
}

// CheckValidityWindow is valid_from <= now < valid_until.
func CheckValidityWindow(validFrom, validUntil, now time.Time) error {
	if now.Before(validFrom) {
		return newError(CodeLicenseNotYetValid, "license not yet valid: it starts at %s", validFrom.UTC().Format(time.RFC3339))
	}
	if !now.Before(validUntil) {
		return newError(CodeLicenseExpired, "license expired at %s", validUntil.UTC().Format(time.RFC3339))
	}
	return nil
}

// SignatureStatus is the outcome of a signature check, for inspection tools that report
// rather than refuse.
type SignatureStatus string

// Signature statuses.
const (
	SignatureValid      SignatureStatus = "valid"
	SignatureInvalid    SignatureStatus = "invalid"
	SignatureUnknownKey SignatureStatus = "unknown key"
)

// CheckSignature reports whether a decoded file's signature verifies with the key set.
func CheckSignature(decoded *DecodedLicenseFile, keys KeySet) SignatureStatus {
	candidates, unknown := keysFor(keys, decoded.Payload.KeyID)
	if unknown != "" {
		return SignatureUnknownKey
	}
	if verifyAny(candidates, decoded.SignedBytes, decoded.Signature) {
		return SignatureValid
	}
	return SignatureInvalid
}

func checkSignature(decoded *DecodedLicenseFile, keys KeySet) error {
	candidates, unknown := keysFor(keys, decoded.Payload.KeyID)
	if unknown != "" {
		return newError(CodeSignatureInvalid, "signature verification failed: %s", describeUnknownKey(unknown, keys))
	}
	if !verifyAny(candidates, decoded.SignedBytes, decoded.Signature) {
		return newError(CodeSignatureInvalid, "signature verification failed")
	}
	return nil
}
