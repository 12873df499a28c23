package offline

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// EndorsementPrefix opens the statement a key endorsement signs (docs/public-keys.md).
const EndorsementPrefix = "license-server key endorsement v1\n"

// Endorsement is one signature over a key by another key of the same server.
type Endorsement struct {
	SignerKeyID string
	Signature   []byte
}

// OfferedKey is a key of a fetched key set, with the endorsements published for it.
type OfferedKey struct {
	VerificationKey
	Endorsements []Endorsement
}

// AllowedKey is a key the application takes without an endorsement: its key id and the
// SHA-256 fingerprint of its 32 raw bytes, in hex.
type AllowedKey struct {
	KeyID       string
	Fingerprint string
}

// EndorsementStatement is what an endorsement of publicKey signs: EndorsementPrefix, the
// key id, a line feed, and the unpadded Base64url of the 32 raw key bytes; no trailing
// newline. It panics on a key that is not 32 bytes.
func EndorsementStatement(publicKey []byte) []byte {
	if len(publicKey) != ed25519.PublicKeySize {
		panic("EndorsementStatement: not a 32-byte Ed25519 public key")
	}
	return []byte(EndorsementPrefix + KeyIDOf(publicKey) + "\n" + base64.RawURLEncoding.EncodeToString(publicKey))
}

// VerifyEndorsement reports whether signature is signer's endorsement of subject (strict
// RFC 8032, as crypto/ed25519 is).
func VerifyEndorsement(signer, subject, signature []byte) bool {
	if len(signer) != ed25519.PublicKeySize || len(subject) != ed25519.PublicKeySize || len(signature) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(signer, EndorsementStatement(subject), signature)
}

// FingerprintOf is the SHA-256 of the 32 raw key bytes, lower-case hex.
func FingerprintOf(publicKey []byte) string {
	sum := sha256.Sum256(publicKey)
	return hex.EncodeToString(sum[:])
}

// AcceptOfferedKeys is the trust rule of docs/public-keys.md: of offered, the keys that
// allowed names by key id and fingerprint, and the keys a trusted key endorsed,
// transitively (a key taken becomes a signer for the others). A key whose key id is not
// its own, or that is trusted already, is never in the result. Keys come in the order
// offered.
func AcceptOfferedKeys(trusted KeySet, offered []OfferedKey, allowed []AllowedKey) []OfferedKey {
	known := map[string]ed25519.PublicKey{}
	for _, k := range trusted {
		known[k.KeyID] = k.PublicKey
	}
	var sound []OfferedKey
	for _, k := range offered {
		if len(k.PublicKey) == ed25519.PublicKeySize && k.KeyID == KeyIDOf(k.PublicKey) && known[k.KeyID] == nil {
			sound = append(sound, k)
		}
	}
	taken := map[string]bool{}
	take := func(k OfferedKey) {
		known[k.KeyID] = k.PublicKey
		taken[k.KeyID] = true
	}
	for _, k := range sound {
		for _, a := range allowed {
			if a.KeyID == k.KeyID && strings.ToLower(a.Fingerprint) == FingerprintOf(k.PublicKey) {
				take(k)
				break
			}
		}
	}
	for grew := true; grew; {
		grew = false
		for _, k := range sound {
			if known[k.KeyID] != nil {
				continue
			}
			for _, e := range k.Endorsements {
				if signer := known[e.SignerKeyID]; signer != nil && VerifyEndorsement(signer, k.PublicKey, e.Signature) {
					take(k)
					grew = true
					break
				}
			}
		}
	}
	var result []OfferedKey
	for _, k := range sound {
		if taken[k.KeyID] {
			result = append(result, k)
		}
	}
	return result
}

// JWK is a key of the server's JWK Set (GET /.well-known/jwks.json) with its endorsements.
type JWK struct {
	Kty          string           `json:"kty"`
	Crv          string           `json:"crv"`
	X            string           `json:"x"`
	Kid          string           `json:"kid"`
	Use          string           `json:"use,omitempty"`
	Alg          string           `json:"alg,omitempty"`
	Endorsements []JWKEndorsement `json:"endorsements"`
}

// JWKEndorsement is an endorsement as the key set publishes it.
type JWKEndorsement struct {
	SignerKeyID string `json:"signer_key_id"`
	Signature   string `json:"signature"`
}

// OfferedKeysOfJWKS reads the keys of a JWK Set as the server publishes it, each member
// name exactly as written (ParseJSON: encoding/json would match "X" for "x", and read
// another key than the Node client from the same set). An entry that is not an Ed25519
// OKP key with a key id is left out, and so is an endorsement that is not a key id and 64
// signature bytes, and an entry or endorsement with two member names that differ only in
// case (JWKOfValue); whether a key is taken is AcceptOfferedKeys's to say. ok is false
// when data is not a JSON object with a "keys" array, or that object has two member names
// that differ only in case ("keys" and "Keys").
func OfferedKeysOfJWKS(data []byte) (keys []OfferedKey, ok bool) {
	value, _, _, err := ParseJSON(data)
	set, isObject := value.(*Object)
	if err != nil || !isObject {
		return nil, false
	}
	if _, _, twice := CaseVariantMembers(set); twice {
		return nil, false
	}
	list, isArray := set.Values["keys"].([]any)
	if !isArray {
		return nil, false
	}
	var entries []JWK
	for _, item := range list {
		if entry := JWKOfValue(item); entry != nil {
			entries = append(entries, *entry)
		}
	}
	return OfferedKeysOf(entries), true
}

// JWKOfValue reads one entry of a JWK Set (or of the client's keys.json) as ParseJSON
// parsed it: nil when it is not an object or has two member names that differ only in
// case; a member of another type reads as "". An endorsement that is not an object or has
// such names is left out.
func JWKOfValue(value any) *JWK {
	o, isObject := value.(*Object)
	if !isObject {
		return nil
	}
	if _, _, twice := CaseVariantMembers(o); twice {
		return nil
	}
	text := func(obj *Object, name string) string {
		s, _ := obj.Values[name].(string)
		return s
	}
	entry := &JWK{Kty: text(o, "kty"), Crv: text(o, "crv"), X: text(o, "x"), Kid: text(o, "kid")}
	list, _ := o.Values["endorsements"].([]any)
	for _, item := range list {
		e, isObject := item.(*Object)
		if !isObject {
			continue
		}
		if _, _, twice := CaseVariantMembers(e); twice {
			continue
		}
		entry.Endorsements = append(entry.Endorsements, JWKEndorsement{SignerKeyID: text(e, "signer_key_id"), Signature: text(e, "signature")})
	}
	return entry
}

// OfferedKeysOf is OfferedKeysOfJWKS for entries already decoded.
func OfferedKeysOf(entries []JWK) []OfferedKey {
	var keys []OfferedKey
	for _, entry := range entries {
		if entry.Kty != "OKP" || entry.Crv != "Ed25519" || !IsKeyID(entry.Kid) {
			continue
		}
		publicKey, ok := decodeBase64URL(entry.X)
		if !ok || len(publicKey) != ed25519.PublicKeySize {
			continue
		}
		var list []Endorsement
		for _, e := range entry.Endorsements {
			if signature, ok := decodeBase64URL(e.Signature); ok && IsKeyID(e.SignerKeyID) && len(signature) == ed25519.SignatureSize {
				list = append(list, Endorsement{SignerKeyID: e.SignerKeyID, Signature: signature})
			}
		}
		keys = append(keys, OfferedKey{VerificationKey: VerificationKey{KeyID: entry.Kid, PublicKey: publicKey}, Endorsements: list})
	}
	return keys
}

// JWKOf is the JWK Set entry of an offered key (what the client keeps in keys.json).
func JWKOf(k OfferedKey) JWK {
	list := []JWKEndorsement{}
	for _, e := range k.Endorsements {
		list = append(list, JWKEndorsement{SignerKeyID: e.SignerKeyID, Signature: base64.RawURLEncoding.EncodeToString(e.Signature)})
	}
	return JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(k.PublicKey), Kid: k.KeyID, Endorsements: list}
}

// decodeBase64URL decodes unpadded Base64url (RFC 4648 section 5), canonical encodings only.
func decodeBase64URL(text string) ([]byte, bool) {
	data, err := base64.RawURLEncoding.Strict().DecodeString(text)
	if err != nil || base64.RawURLEncoding.EncodeToString(data) != text {
		return nil, false
	}
	return data, true
}
