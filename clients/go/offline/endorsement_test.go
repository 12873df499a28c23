package offline

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The vectors of docs/public-keys.md, the ones test/lib/crypto/key-endorsement.test.ts reads.
type endorsementVectors struct {
	Keys map[string]struct {
		SeedHex      string `json:"seed_hex"`
		PublicKeyHex string `json:"public_key_hex"`
		KeyID        string `json:"key_id"`
		Fingerprint  string `json:"fingerprint"`
	} `json:"keys"`
	Endorsement struct {
		Signer, Subject, Statement, Signature string
		StatementHex                          string `json:"statement_hex"`
	} `json:"endorsement"`
	Trust []struct {
		Name    string   `json:"name"`
		Trusted []string `json:"trusted"`
		Offered []JWK    `json:"offered"`
		Allowed []struct {
			KeyID       string `json:"key_id"`
			Fingerprint string `json:"fingerprint"`
		} `json:"allowed"`
		Accepted []string `json:"accepted"`
	} `json:"trust"`
}

func loadEndorsementVectors(t *testing.T) endorsementVectors {
	data, err := os.ReadFile(filepath.Join(vectorsDir, "key-endorsement.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v endorsementVectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestEndorsementVectors(t *testing.T) {
	v := loadEndorsementVectors(t)
	keys := map[string]VerificationKey{}
	for name, k := range v.Keys {
		seed, _ := hex.DecodeString(k.SeedHex)
		public := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
		if hex.EncodeToString(public) != k.PublicKeyHex || KeyIDOf(public) != k.KeyID || FingerprintOf(public) != k.Fingerprint {
			t.Fatalf("key %s does not match its seed", name)
		}
		keys[name] = VerificationKey{KeyID: k.KeyID, PublicKey: public}
	}
	e := v.Endorsement
	statement := EndorsementStatement(keys[e.Subject].PublicKey)
	if string(statement) != e.Statement || hex.EncodeToString(statement) != e.StatementHex {
		t.Fatalf("statement %q", statement)
	}
	seed, _ := hex.DecodeString(v.Keys[e.Signer].SeedHex)
	signature := ed25519.Sign(ed25519.NewKeyFromSeed(seed), statement)
	if base64.RawURLEncoding.EncodeToString(signature) != e.Signature {
		t.Fatal("the signature differs from the vector")
	}
	if !VerifyEndorsement(keys[e.Signer].PublicKey, keys[e.Subject].PublicKey, signature) || VerifyEndorsement(keys[e.Subject].PublicKey, keys[e.Subject].PublicKey, signature) {
		t.Fatal("VerifyEndorsement")
	}
	for _, c := range v.Trust {
		var trusted KeySet
		for _, name := range c.Trusted {
			trusted = append(trusted, keys[name])
		}
		var allowed []AllowedKey
		for _, a := range c.Allowed {
			allowed = append(allowed, AllowedKey{KeyID: a.KeyID, Fingerprint: a.Fingerprint})
		}
		accepted := []string{}
		for _, k := range AcceptOfferedKeys(trusted, OfferedKeysOf(c.Offered), allowed) {
			accepted = append(accepted, k.KeyID)
		}
		if !reflect.DeepEqual(accepted, append([]string{}, c.Accepted...)) {
			t.Errorf("%s: accepted %v, want %v", c.Name, accepted, c.Accepted)
		}
	}
}
