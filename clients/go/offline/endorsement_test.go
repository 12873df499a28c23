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
		// Offered is read as the client reads a fetched set (OfferedKeysOfJWKS), not with
		// encoding/json, which matches member names without case.
		Offered json.RawMessage `json:"offered"`
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
		offered, ok := OfferedKeysOfJWKS([]byte(`{"keys":` + string(c.Offered) + `}`))
		if !ok {
			t.Fatalf("%s: not read as a key set", c.Name)
		}
		for _, k := range AcceptOfferedKeys(trusted, offered, allowed) {
			accepted = append(accepted, k.KeyID)
		}
		if !reflect.DeepEqual(accepted, append([]string{}, c.Accepted...)) {
			t.Errorf("%s: accepted %v, want %v", c.Name, accepted, c.Accepted)
		}
	}
}

// A set read as the Node client reads it: member names exactly, and a set or an entry with
// two names that differ only in case refused (encoding/json took "Keys" or "X" for them).
func TestOfferedKeysOfJWKSReadsNamesExactly(t *testing.T) {
	v := loadEndorsementVectors(t)
	sound := string(v.Trust[0].Offered)
	if keys, ok := OfferedKeysOfJWKS([]byte(`{"keys":` + sound + `}`)); !ok || len(keys) != 2 {
		t.Fatalf("the sound set: %v %v", keys, ok)
	}
	for _, set := range []string{`{"keys":` + sound + `,"Keys":[]}`, `{"Keys":` + sound + `}`, `{"KEYS":` + sound + `,"keys":` + sound + `}`} {
		if keys, ok := OfferedKeysOfJWKS([]byte(set)); ok || keys != nil {
			t.Errorf("%.40s...: read as a set (%d keys)", set, len(keys))
		}
	}
	first, second, found := CaseVariantMembers(&Object{Names: []string{"kty", "x", "kid", "X"}})
	if !found || first != "x" || second != "X" {
		t.Fatalf("CaseVariantMembers: %q %q %v", first, second, found)
	}
	// Only ASCII letters fold: the Kelvin sign is not "k" (encoding/json folded it too).
	if _, _, found := CaseVariantMembers(&Object{Names: []string{"kid", "\u212aid", "x", "y"}}); found {
		t.Fatal("CaseVariantMembers folded more than ASCII")
	}
}
