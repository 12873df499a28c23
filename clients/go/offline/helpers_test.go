package offline

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The vectors live in the repository's test/vectors (docs/offline-license-format.md
// section 10, docs/grace-token.md "Worked example"); the Go client is tested against
// the very files the TypeScript reference is.
var vectorsDir = filepath.Join("..", "..", "..", "test", "vectors")

type licVector struct {
	Name             string          `json:"name"`
	Payload          json.RawMessage `json:"payload"`
	CanonicalPayload string          `json:"canonical_payload"`
	CanonicalHex     string          `json:"canonical_payload_hex"`
	SignatureBase64  string          `json:"signature_base64"`
	File             string          `json:"file"`
	SecretKeyHex     string          `json:"secret_key_hex"`
	Binding          *struct {
		HardwareID       string `json:"hardware_id"`
		Info             string `json:"info"`
		BindingKeyHex    string `json:"binding_key_hex"`
		DecryptionKeyHex string `json:"decryption_key_hex"`
		NonceHex         string `json:"nonce_hex"`
	} `json:"binding"`
}

type licVectors struct {
	SigningSecretKeyHex string      `json:"signing_secret_key_hex"`
	PublicKeyHex        string      `json:"public_key_hex"`
	PublicKeyPEM        string      `json:"public_key_pem"`
	KeyID               string      `json:"key_id"`
	SecondSecretKeyHex  string      `json:"second_secret_key_hex"`
	SecondPublicKeyHex  string      `json:"second_public_key_hex"`
	SecondKeyID         string      `json:"second_key_id"`
	KeySetPEM           string      `json:"key_set_pem"`
	Vectors             []licVector `json:"vectors"`
}

type graceVector struct {
	KeyID      string          `json:"key_id"`
	HeaderJSON string          `json:"header_json"`
	ClaimsJSON string          `json:"claims_json"`
	Token      string          `json:"token"`
	HardwareID string          `json:"hardware_id"`
	JWKS       json.RawMessage `json:"jwks"`
	// VerifiedAt is the time every token of Accepted and Refused is checked at.
	VerifiedAt time.Time `json:"verified_at"`
	// Accepted are tokens a verifier accepts although the server does not write them so.
	Accepted []struct {
		Name  string `json:"name"`
		Token string `json:"token"`
		Iat   int64  `json:"iat"`
		Exp   int64  `json:"exp"`
	} `json:"accepted"`
	// Refused are tokens signed by the same key that break docs/grace-token.md.
	Refused []struct {
		Name    string `json:"name"`
		Token   string `json:"token"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"refused"`
}

func readVectorFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(vectorsDir, name))
	if err != nil {
		t.Fatalf("reading the vectors: %v", err)
	}
	return data
}

func loadLicVectors(t *testing.T) *licVectors {
	t.Helper()
	var v licVectors
	if err := json.Unmarshal(readVectorFile(t, "offline-license-v1.json"), &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

func loadGraceVector(t *testing.T) *graceVector {
	t.Helper()
	var v graceVector
	if err := json.Unmarshal(readVectorFile(t, "grace-token.json"), &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (v *licVectors) vector(t *testing.T, name string) *licVector {
	t.Helper()
	for i := range v.Vectors {
		if v.Vectors[i].Name == name {
			return &v.Vectors[i]
		}
	}
	t.Fatalf("no vector %s", name)
	return nil
}

func (v *licVectors) secretKey(t *testing.T, vector *licVector) ed25519.PrivateKey {
	seed := v.SigningSecretKeyHex
	if vector != nil && vector.SecretKeyHex != "" {
		seed = vector.SecretKeyHex
	}
	return ed25519.NewKeyFromSeed(mustHex(t, seed))
}

func mustKeySet(t *testing.T, parts ...[]byte) KeySet {
	t.Helper()
	keys, err := ParseKeySetFrom("public key", parts...)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func parseObject(t *testing.T, text []byte) *Object {
	t.Helper()
	v, _, repeated, err := ParseJSON(text)
	if err != nil || repeated {
		t.Fatalf("parse %s: %v", text, err)
	}
	return v.(*Object)
}

// with returns a copy of o with name set to value (a Go value: string, float64, nil,
// []any, *Object), or removed when value is the remove marker.
type removeMarker struct{}

var remove = removeMarker{}

func with(o *Object, name string, value any) *Object {
	out := o.Without(name)
	if _, isRemove := value.(removeMarker); isRemove {
		return out
	}
	out.Names = append(out.Names, name)
	out.Values[name] = value
	return out
}

// forge signs an arbitrary payload as a writer that ignored the rules would, and encodes
// the file: Base64(JCS(payload + signature)) LF.
func forge(t *testing.T, payload *Object, key ed25519.PrivateKey) []byte {
	t.Helper()
	message, err := Canonicalize(payload)
	if err != nil {
		t.Fatal(err)
	}
	document := with(payload, "signature", EncodeBase64(ed25519.Sign(key, message)))
	text, err := Canonicalize(document)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(text) + "\n")
}

func b64(text string) []byte { return []byte(base64.StdEncoding.EncodeToString([]byte(text))) }

// refusedWith asserts that err is an *Error with the code, and that its message
// contains each of the parts.
func refusedWith(t *testing.T, err error, code string, parts ...string) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("expected %s, got no error", code)
	}
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("expected an *Error, got %T: %v", err, err)
	}
	if e.Code != code {
		t.Fatalf("expected %s, got %s: %s", code, e.Code, e.Message)
	}
	for _, part := range parts {
		if !strings.Contains(e.Message, part) {
			t.Fatalf("the message %q does not contain %q", e.Message, part)
		}
	}
	return e
}

var inWindow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
