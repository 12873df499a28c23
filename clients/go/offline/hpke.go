package offline

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
)

// HPKE (RFC 9180), mode_base, for the one suite the machine-key binding uses:
// DHKEM(X25519, HKDF-SHA256) 0x0020, HKDF-SHA256 0x0001, AES-256-GCM 0x0002; only the
// single-shot SealBase/OpenBase of section 6.1 (one message, sequence number 0, so the
// AEAD nonce is base_nonce). Names follow the RFC.
const (
	HPKEKemID  = 0x0020
	HPKEKdfID  = 0x0001
	HPKEAeadID = 0x0002
	// HPKEEncLength is Nenc, the length of enc (the ephemeral public key).
	HPKEEncLength = 32
	// HPKETagLength is Nt, what a ciphertext adds to its plaintext.
	HPKETagLength = 16
	hpkeModeBase  = 0x00
	hpkeNk        = 32
	hpkeNn        = 12
	hpkeNh        = 32
)

var (
	hpkeV1         = []byte("HPKE-v1")
	hpkeKemSuiteID = []byte{'K', 'E', 'M', 0x00, 0x20}
	hpkeSuiteID    = []byte{'H', 'P', 'K', 'E', 0x00, 0x20, 0x00, 0x01, 0x00, 0x02}
)

func concatBytes(parts ...[]byte) []byte {
	var out []byte
	for _, part := range parts {
		out = append(out, part...)
	}
	return out
}

// labeledExtract is LabeledExtract(salt, label, ikm) of RFC 9180 section 4.
func labeledExtract(suiteID, salt []byte, label string, ikm []byte) []byte {
	return hkdfExtract(salt, concatBytes(hpkeV1, suiteID, []byte(label), ikm))
}

// labeledExpand is LabeledExpand(prk, label, info, L) of RFC 9180 section 4.
func labeledExpand(suiteID, prk []byte, label string, info []byte, length int) []byte {
	var l [2]byte
	binary.BigEndian.PutUint16(l[:], uint16(length))
	return hkdfExpand(prk, concatBytes(l[:], hpkeV1, suiteID, []byte(label), info), length)
}

func hpkeExtractAndExpand(dh, kemContext []byte) []byte {
	eaePRK := labeledExtract(hpkeKemSuiteID, nil, "eae_prk", dh)
	return labeledExpand(hpkeKemSuiteID, eaePRK, "shared_secret", kemContext, 32)
}

// hpkeEncap is Encap(pkR) of section 4.1; skE is the ephemeral private key (fresh unless a
// known-answer test passes the RFC's skEm).
func hpkeEncap(pkR, skE []byte) (sharedSecret, enc []byte, err error) {
	if len(pkR) != X25519KeyLength {
		return nil, nil, errors.New("hpke: the recipient public key must be 32 bytes")
	}
	if skE == nil {
		if skE, _, err = GenerateX25519(); err != nil {
			return nil, nil, err
		}
	}
	enc, err = X25519PublicKey(skE)
	if err != nil {
		return nil, nil, err
	}
	dh, err := X25519(skE, pkR)
	if err != nil {
		return nil, nil, err
	}
	return hpkeExtractAndExpand(dh, concatBytes(enc, pkR)), enc, nil
}

// hpkeDecap is Decap(enc, skR) of section 4.1.
func hpkeDecap(enc, skR []byte) ([]byte, error) {
	if len(enc) != HPKEEncLength {
		return nil, errors.New("hpke: enc must be 32 bytes")
	}
	pkR, err := X25519PublicKey(skR)
	if err != nil {
		return nil, err
	}
	dh, err := X25519(skR, enc)
	if err != nil {
		return nil, err
	}
	return hpkeExtractAndExpand(dh, concatBytes(enc, pkR)), nil
}

// hpkeKeySchedule is the KeySchedule of section 5.1 for mode_base (no PSK).
type hpkeKeySchedule struct {
	context, secret, key, baseNonce, exporterSecret []byte
}

func hpkeKeyScheduleBase(sharedSecret, info []byte) hpkeKeySchedule {
	pskIDHash := labeledExtract(hpkeSuiteID, nil, "psk_id_hash", nil)
	infoHash := labeledExtract(hpkeSuiteID, nil, "info_hash", info)
	context := concatBytes([]byte{hpkeModeBase}, pskIDHash, infoHash)
	secret := labeledExtract(hpkeSuiteID, sharedSecret, "secret", nil)
	return hpkeKeySchedule{
		context:        context,
		secret:         secret,
		key:            labeledExpand(hpkeSuiteID, secret, "key", context, hpkeNk),
		baseNonce:      labeledExpand(hpkeSuiteID, secret, "base_nonce", context, hpkeNn),
		exporterSecret: labeledExpand(hpkeSuiteID, secret, "exp", context, hpkeNh),
	}
}

func hpkeAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// HPKESealBase is SealBase(pkR, info, aad, pt) of RFC 9180 section 6.1: it returns enc and
// the ciphertext (plaintext length + 16). skE is nil in every real use (a fresh ephemeral
// key); a known-answer test passes the RFC's skEm.
func HPKESealBase(pkR, info, aad, plaintext, skE []byte) (enc, ciphertext []byte, err error) {
	sharedSecret, enc, err := hpkeEncap(pkR, skE)
	if err != nil {
		return nil, nil, err
	}
	schedule := hpkeKeyScheduleBase(sharedSecret, info)
	aead, err := hpkeAEAD(schedule.key)
	if err != nil {
		return nil, nil, err
	}
	return enc, aead.Seal(nil, schedule.baseNonce, plaintext, aad), nil
}

// HPKEOpenBase is OpenBase(enc, skR, info, aad, ct) of RFC 9180 section 6.1. It fails when
// the tag does not verify: another private key, info or aad, or a changed enc or
// ciphertext (GCM cannot tell which). Nothing is returned unless the tag verified.
func HPKEOpenBase(enc, skR, info, aad, ciphertext []byte) ([]byte, error) {
	if len(ciphertext) < HPKETagLength {
		return nil, errors.New("hpke: the ciphertext is shorter than its tag")
	}
	sharedSecret, err := hpkeDecap(enc, skR)
	if err != nil {
		return nil, err
	}
	schedule := hpkeKeyScheduleBase(sharedSecret, info)
	aead, err := hpkeAEAD(schedule.key)
	if err != nil {
		return nil, err
	}
	plaintext, err := aead.Open(nil, schedule.baseNonce, ciphertext, aad)
	if err != nil {
		return nil, errors.New("hpke: open failed (the tag does not verify)")
	}
	return plaintext, nil
}
