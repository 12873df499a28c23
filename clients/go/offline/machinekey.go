package offline

import (
	"bytes"
	"encoding/base64"
	"regexp"
)

// The machine-key binding (docs/offline-license-format.md, "The machine-key binding"): a
// .lic of format version 2 names the machine's X25519 public key in machine_key, and
// encrypted_key is the decryption key sealed to it with HPKE (RFC 9180 base mode,
// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM):
//
//	info          = UTF-8("license-server/v2/machine-key\n" + license_id + "\n" + hardware_id)
//	enc, ct       = SealBase(machine_key, info, aad = "", decryption key)
//	encrypted_key = Base64(enc (32) || ct (48))   -- 80 bytes
//
// Only the machine's private key opens it; nothing in the file does.
const (
	// MachineKeyInfoPrefix starts HPKE's info.
	MachineKeyInfoPrefix = "license-server/v2/machine-key\n"
	// MachineSealedKeyLength is the length of encrypted_key in a file with machine_key.
	MachineSealedKeyLength = HPKEEncLength + DecryptionKeyLength + HPKETagLength
	// CodeMachineKeyMissing: a machine-key file's key was to be opened without the machine's private key.
	CodeMachineKeyMissing = "MACHINE_KEY_MISSING"
)

var machineKeyText = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// MachineKeyInfo is HPKE's info for one license and machine.
func MachineKeyInfo(licenseID, hardwareID string) []byte {
	return []byte(MachineKeyInfoPrefix + toUTF8(licenseID) + "\n" + toUTF8(hardwareID))
}

// DecodeMachineKey reads a machine_key: unpadded base64url of 32 bytes, 43 characters,
// canonical (the two unused low bits of the last character are zero).
func DecodeMachineKey(text string) ([]byte, bool) {
	if !machineKeyText.MatchString(text) {
		return nil, false
	}
	key, err := base64.RawURLEncoding.Strict().DecodeString(text)
	if err != nil || len(key) != X25519KeyLength {
		return nil, false
	}
	return key, true
}

// EncodeMachineKey writes a 32-byte X25519 public key as a machine_key.
func EncodeMachineKey(public []byte) string {
	return base64.RawURLEncoding.EncodeToString(public)
}

// SealForMachine seals a 32-byte decryption key to a machine's public key, as the server
// does at checkout. skE is nil except in the known-answer test.
func SealForMachine(decryptionKey, machineKey []byte, licenseID, hardwareID string, skE []byte) (string, error) {
	if len(decryptionKey) != DecryptionKeyLength {
		return "", newError(CodeDecryptionFailed, "decryption key: expected 32 bytes")
	}
	enc, ct, err := HPKESealBase(machineKey, MachineKeyInfo(licenseID, hardwareID), nil, decryptionKey, skE)
	if err != nil {
		return "", err
	}
	return EncodeBase64(append(enc, ct...)), nil
}

// UnsealForMachine opens the encrypted_key of a machine-key file with the machine's
// private key: MACHINE_KEY_MISSING without one, DECRYPTION_FAILED with another machine's
// key or a changed file. Nothing is returned unless the tag verified.
func UnsealForMachine(encryptedKey, machineKey, licenseID, hardwareID string, machinePrivateKey []byte) ([]byte, error) {
	if len(machinePrivateKey) == 0 {
		return nil, newError(CodeMachineKeyMissing, "failed to decrypt license key: it is sealed to the machine key of the file, and no machine private key was given")
	}
	public, ok := DecodeMachineKey(machineKey)
	sealed, okSealed := DecodeBase64Strict(encryptedKey)
	if !ok || !okSealed || len(sealed) != MachineSealedKeyLength {
		return nil, newError(CodeDecryptionFailed, "failed to decrypt license key: the sealed key has the wrong length")
	}
	mine, err := X25519PublicKey(machinePrivateKey)
	if err != nil || !bytes.Equal(mine, public) {
		return nil, newError(CodeDecryptionFailed, "failed to decrypt license key: the machine private key given is not the one of the file's machine_key")
	}
	plain, err := HPKEOpenBase(sealed[:HPKEEncLength], machinePrivateKey, MachineKeyInfo(licenseID, hardwareID), nil, sealed[HPKEEncLength:])
	if err != nil || len(plain) != DecryptionKeyLength {
		return nil, newError(CodeDecryptionFailed, "failed to decrypt license key")
	}
	return plain, nil
}

// checkMachineKeyMember reads machine_key of a version 2 file (format.go calls it).
func checkMachineKeyMember(object *Object, hardwareID string) (string, error) {
	v, present := object.Get("machine_key")
	if !present {
		return "", nil
	}
	s, isString := v.(string)
	if _, ok := DecodeMachineKey(s); !isString || !ok {
		return "", malformed(`"machine_key" must be the unpadded base64url of 32 bytes (43 characters)`)
	}
	if hardwareID == "" {
		return "", malformed(`"machine_key" requires a "hardware_id"`)
	}
	return s, nil
}
