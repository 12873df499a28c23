package offline

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
)

// Hardware binding of a license's decryption key (docs/offline-license-format.md section
// 7): sealed with AES-256-GCM under HKDF-SHA256(IKM = hardware ID, salt = license id,
// info = BindingInfo), all UTF-8; encrypted_key = Base64(nonce || ciphertext || tag).
const (
	BindingInfo         = "license-server/v1/offline-decryption-key"
	NonceLength         = 12
	TagLength           = 16
	DecryptionKeyLength = 32
	SealedKeyLength     = NonceLength + DecryptionKeyLength + TagLength
	// MaxHardwareIDLength is the limit of a hardware ID: 256 UTF-16 code units as given,
	// and 256 bytes of UTF-8.
	MaxHardwareIDLength = 256
)

// DeriveBindingKey is the 32-byte AES key that seals a decryption key for one machine.
func DeriveBindingKey(hardwareID, licenseID string) []byte {
	key, _ := HKDFSHA256([]byte(toUTF8(hardwareID)), []byte(toUTF8(licenseID)), []byte(BindingInfo), 32)
	return key
}

// SealDecryptionKey seals a 32-byte decryption key for a hardware ID, as the server does
// at checkout. nonce is 12 bytes; nil means a random one.
func SealDecryptionKey(decryptionKey []byte, hardwareID, licenseID string, nonce []byte) (string, error) {
	if len(decryptionKey) != DecryptionKeyLength {
		return "", errors.New("decryption key: expected 32 bytes")
	}
	if nonce == nil {
		nonce = make([]byte, NonceLength)
		if _, err := rand.Read(nonce); err != nil {
			return "", err
		}
	}
	if len(nonce) != NonceLength {
		return "", errors.New("nonce: expected 12 bytes")
	}
	aead, err := bindingAEAD(hardwareID, licenseID)
	if err != nil {
		return "", err
	}
	sealed := aead.Seal(append([]byte(nil), nonce...), nonce, decryptionKey, nil)
	return EncodeBase64(sealed), nil
}

// UnsealDecryptionKey opens a sealed key with this machine's hardware ID. Any failure,
// a different hardware ID included, is DECRYPTION_FAILED ("failed to decrypt license
// key"): GCM cannot tell a wrong key from tampering. Nothing is returned unless the tag
// verified.
func UnsealDecryptionKey(encryptedKey, hardwareID, licenseID string) ([]byte, error) {
	sealed, ok := DecodeBase64Strict(encryptedKey)
	if !ok || len(sealed) != SealedKeyLength {
		return nil, newError(CodeDecryptionFailed, "failed to decrypt license key: the sealed key has the wrong length")
	}
	aead, err := bindingAEAD(hardwareID, licenseID)
	if err != nil {
		return nil, newError(CodeDecryptionFailed, "failed to decrypt license key")
	}
	plain, err := aead.Open(nil, sealed[:NonceLength], sealed[NonceLength:], nil)
	if err != nil || len(plain) != DecryptionKeyLength {
		return nil, newError(CodeDecryptionFailed, "failed to decrypt license key")
	}
	return plain, nil
}

func bindingAEAD(hardwareID, licenseID string) (cipher.AEAD, error) {
	block, err := aes.NewCipher(DeriveBindingKey(hardwareID, licenseID))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
