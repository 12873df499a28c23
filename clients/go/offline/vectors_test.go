package offline

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

func TestVectorKeys(t *testing.T) {
	v := loadLicVectors(t)
	pub := v.secretKey(t, nil).Public().(ed25519.PublicKey)
	if hex.EncodeToString(pub) != v.PublicKeyHex {
		t.Fatalf("public key of the RFC 8032 TEST 1 seed: %x", pub)
	}
	pem, err := PublicKeyToPEM(pub)
	if err != nil || pem != v.PublicKeyPEM || pem != string(readVectorFile(t, "signing-key.pem")) {
		t.Fatalf("PublicKeyToPEM: %q %v", pem, err)
	}
	fromPEM, err := PublicKeyFromPEM(v.PublicKeyPEM)
	if err != nil || !bytes.Equal(fromPEM, pub) {
		t.Fatalf("PublicKeyFromPEM: %x %v", fromPEM, err)
	}
	if got := KeyIDOf(mustHex(t, v.PublicKeyHex)); got != v.KeyID || got != "21fe31dfa154a261" {
		t.Fatalf("key id %s", got)
	}
	if got := KeyIDOf(mustHex(t, v.SecondPublicKeyHex)); got != v.SecondKeyID || got != "39f713d0a644253f" {
		t.Fatalf("second key id %s", got)
	}
	if string(readVectorFile(t, "key-set.pem")) != v.KeySetPEM {
		t.Fatal("key-set.pem differs from key_set_pem")
	}
	set, err := ParseKeySet([]byte(v.KeySetPEM))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.KeyIDs(), ","); got != v.SecondKeyID+","+v.KeyID {
		t.Fatalf("key set order: %s", got)
	}
	if v.vector(t, "rotated-key") == nil {
		t.Fatal("no rotated-key vector")
	}
}

func TestLicenseFileVectors(t *testing.T) {
	v := loadLicVectors(t)
	keySet := mustKeySet(t, []byte(v.KeySetPEM))
	for i := range v.Vectors {
		vector := &v.Vectors[i]
		t.Run(vector.Name, func(t *testing.T) {
			payload := parseObject(t, vector.Payload)
			secret := v.secretKey(t, vector)
			pub := secret.Public().(ed25519.PublicKey)

			// RFC 8785 canonical form, byte for byte.
			canonical, err := Canonicalize(payload)
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(canonical) != vector.CanonicalHex || string(canonical) != vector.CanonicalPayload {
				t.Fatalf("canonical payload:\n got %s\nwant %s", canonical, vector.CanonicalPayload)
			}

			// Ed25519 is deterministic: the same signature as the reference.
			signature := ed25519.Sign(secret, canonical)
			if base64.StdEncoding.EncodeToString(signature) != vector.SignatureBase64 {
				t.Fatalf("signature %s", base64.StdEncoding.EncodeToString(signature))
			}

			// The exact file bytes, as kept in test/vectors/<name>.lic.
			file := forge(t, payload, secret)
			if string(file) != vector.File {
				t.Fatalf("file:\n got %s\nwant %s", file, vector.File)
			}
			if string(readVectorFile(t, vector.Name+".lic")) != vector.File {
				t.Fatalf("%s.lic differs from the vector", vector.Name)
			}

			// Decoding gives back the payload and the signed bytes.
			decoded, err := DecodeLicenseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(decoded.SignedBytes) != vector.CanonicalHex {
				t.Fatal("signed bytes differ from the canonical payload")
			}
			p := decoded.Payload
			if p.LicenseID != "c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d" || p.LicenseKeyPrefix != "7KQ2-M9X" ||
				p.CustomerName != "Müller & Söhne <GmbH> \"Ωmega\" \\ Zürich 🚀" || p.Issuer != "licenses.example.com" ||
				p.ValidFrom.Format("2006-01-02T15:04:05Z") != "2026-01-01T00:00:00Z" ||
				p.ValidUntil.Format("2006-01-02T15:04:05Z") != "2026-12-31T23:59:59Z" ||
				len(p.Entitlements) != 2 || p.Entitlements[0].Code != "export" || p.Entitlements[0].UsageLimit != nil ||
				p.Entitlements[1].UsageLimit == nil || *p.Entitlements[1].UsageLimit != 25 {
				t.Fatalf("decoded payload %+v", p)
			}

			// Verifies inside its window with its own key and with the key set.
			hardwareID := ""
			if vector.Binding != nil {
				hardwareID = vector.Binding.HardwareID
			}
			own, _ := PublicKeyToPEM(pub)
			for _, keys := range []KeySet{mustKeySet(t, []byte(own)), mustKeySet(t, pub), keySet} {
				verified, err := VerifyLicenseFile([]byte(vector.File), VerifyOptions{Keys: keys, HardwareID: hardwareID, Now: inWindow})
				if err != nil {
					t.Fatal(err)
				}
				if !verified.HardwareChecked {
					t.Fatal("hardware not checked")
				}
				if vector.Binding != nil && hex.EncodeToString(verified.DecryptionKey) != vector.Binding.DecryptionKeyHex {
					t.Fatalf("decryption key %x", verified.DecryptionKey)
				}
				if vector.Binding == nil && verified.DecryptionKey != nil {
					t.Fatal("a decryption key from an unbound file")
				}
			}

			if b := vector.Binding; b != nil {
				if b.Info != BindingInfo {
					t.Fatalf("info %q", b.Info)
				}
				if got := hex.EncodeToString(DeriveBindingKey(b.HardwareID, p.LicenseID)); got != b.BindingKeyHex {
					t.Fatalf("binding key %s", got)
				}
				sealed, err := SealDecryptionKey(mustHex(t, b.DecryptionKeyHex), b.HardwareID, p.LicenseID, mustHex(t, b.NonceHex))
				if err != nil || sealed != p.EncryptedKey {
					t.Fatalf("sealed %s %v", sealed, err)
				}
				key, err := UnsealDecryptionKey(sealed, b.HardwareID, p.LicenseID)
				if err != nil || hex.EncodeToString(key) != b.DecryptionKeyHex {
					t.Fatalf("unsealed %x %v", key, err)
				}
			}
		})
	}
}

func TestRotatedKeyNotInSet(t *testing.T) {
	v := loadLicVectors(t)
	rotated := v.vector(t, "rotated-key")
	_, err := VerifyLicenseFile([]byte(rotated.File), VerifyOptions{Keys: mustKeySet(t, []byte(v.PublicKeyPEM)), Now: inWindow})
	e := refusedWith(t, err, CodeSignatureInvalid)
	want := "signature verification failed: it is signed by key 39f713d0a644253f, which is not in the key set given (key 21fe31dfa154a261)"
	if e.Message != want {
		t.Fatalf("message %q", e.Message)
	}
	// With two other keys, the parentheses list both.
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32)).Public().(ed25519.PublicKey)
	_, err = VerifyLicenseFile([]byte(rotated.File), VerifyOptions{Keys: mustKeySet(t, []byte(v.PublicKeyPEM), other), Now: inWindow})
	refusedWith(t, err, CodeSignatureInvalid, "(keys 21fe31dfa154a261, "+KeyIDOf(other)+")")
	// A key id that names a key of the set checks with that key only.
	unbound := parseObject(t, v.vector(t, "unbound").Payload)
	named := with(unbound, "key_id", v.SecondKeyID)
	file := forge(t, named, v.secretKey(t, nil)) // signed by TEST 1, naming TEST 2
	_, err = VerifyLicenseFile(file, VerifyOptions{Keys: mustKeySet(t, []byte(v.KeySetPEM)), Now: inWindow})
	refusedWith(t, err, CodeSignatureInvalid)
	if e := err.(*Error); e.Message != "signature verification failed" {
		t.Fatalf("message %q", e.Message)
	}
}

// RFC 5869 appendix A, test cases 1-3 (SHA-256).
func TestHKDFRFC5869(t *testing.T) {
	cases := []struct{ ikm, salt, info, okm string }{
		{
			"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "000102030405060708090a0b0c", "f0f1f2f3f4f5f6f7f8f9",
			"3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",
		},
		{
			"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f",
			"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aaabacadaeaf",
			"b0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",
			"b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87",
		},
		{"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "", "", "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"},
	}
	for i, c := range cases {
		okm, err := HKDFSHA256(mustHex(t, c.ikm), mustHex(t, c.salt), mustHex(t, c.info), len(c.okm)/2)
		if err != nil || hex.EncodeToString(okm) != c.okm {
			t.Fatalf("case %d: %x %v", i+1, okm, err)
		}
	}
	if _, err := HKDFSHA256(nil, nil, nil, 255*32+1); err == nil {
		t.Fatal("an over-long output was accepted")
	}
}
