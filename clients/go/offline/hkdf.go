package offline

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
)

// HKDFSHA256 is HKDF (RFC 5869) with HMAC-SHA256: extract a pseudorandom key from ikm and
// salt (an empty salt is HashLen zero bytes), then expand it with info to length bytes
// (at most 255 × 32).
func HKDFSHA256(ikm, salt, info []byte, length int) ([]byte, error) {
	if length < 0 || length > 255*sha256.Size {
		return nil, errors.New("hkdf: the output length must be between 0 and 8160 bytes")
	}
	return hkdfExpand(hkdfExtract(salt, ikm), info, length), nil
}

// hkdfExtract and hkdfExpand are RFC 5869's two steps, apart for HPKE's labeled forms (hpke.go).
func hkdfExtract(salt, ikm []byte) []byte {
	if len(salt) == 0 {
		salt = make([]byte, sha256.Size)
	}
	mac := hmac.New(sha256.New, salt)
	mac.Write(ikm)
	return mac.Sum(nil)
}

func hkdfExpand(prk, info []byte, length int) []byte {
	out := make([]byte, 0, length+sha256.Size)
	var previous []byte
	for counter := byte(1); len(out) < length; counter++ {
		mac := hmac.New(sha256.New, prk)
		mac.Write(previous)
		mac.Write(info)
		mac.Write([]byte{counter})
		previous = mac.Sum(nil)
		out = append(out, previous...)
	}
	return out[:length]
}
