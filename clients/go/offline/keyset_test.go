package offline

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"
)

func TestKeySetForms(t *testing.T) {
	v := loadLicVectors(t)
	first, second := mustHex(t, v.PublicKeyHex), mustHex(t, v.SecondPublicKeyHex)
	firstPEM, _ := PublicKeyToPEM(first)
	secondPEM, _ := PublicKeyToPEM(second)
	forms := [][][]byte{
		{[]byte(v.KeySetPEM)},
		{[]byte(secondPEM), []byte(firstPEM)},
		{second, first},
		{second, []byte(firstPEM)},
		{[]byte(secondPEM + "\n\nsome comment\n" + firstPEM)},
		{[]byte(strings.ReplaceAll(v.KeySetPEM, "\n", "\r\n"))},
	}
	for i, parts := range forms {
		set, err := ParseKeySetFrom("public key", parts...)
		if err != nil {
			t.Fatalf("form %d: %v", i, err)
		}
		if got := strings.Join(set.KeyIDs(), ","); got != "39f713d0a644253f,21fe31dfa154a261" {
			t.Fatalf("form %d: %s", i, got)
		}
		if !bytes.Equal(set[1].PublicKey, first) {
			t.Fatalf("form %d: wrong key bytes", i)
		}
	}
	// A PEM body wrapped differently is the same key.
	body := "MCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
	wrapped := "-----BEGIN PUBLIC KEY-----\n" + body[:20] + "\n  " + body[20:] + "\n-----END PUBLIC KEY-----"
	if set, err := ParseKeySet([]byte(wrapped)); err != nil || set[0].KeyID != v.KeyID {
		t.Fatal(err)
	}
}

func TestKeySetRefusals(t *testing.T) {
	v := loadLicVectors(t)
	first := mustHex(t, v.PublicKeyHex)
	firstPEM, _ := PublicKeyToPEM(first)
	private := "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n-----END PRIVATE KEY-----\n"
	cases := []struct {
		source string
		parts  [][]byte
		want   string
	}{
		{"offline.publicKey", [][]byte{[]byte(firstPEM + private)}, `offline.publicKey: block 2 is a private key ("PRIVATE KEY"); a key set holds public keys only`},
		{"offline.publicKey", [][]byte{[]byte(firstPEM), []byte(private)}, `offline.publicKey 2: block 1 is a private key ("PRIVATE KEY")`},
		{"public key", [][]byte{[]byte(strings.Replace(private, "PRIVATE KEY", "ENCRYPTED PRIVATE KEY", 2))}, `block 1 is a private key ("ENCRYPTED PRIVATE KEY")`},
		{"public key", [][]byte{[]byte(firstPEM + "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA")}, "public key: block 2 is not closed (is the file cut short?)"},
		{"public key", [][]byte{[]byte("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n-----END PUBLIC KEZ-----\n")}, `begins "PUBLIC KEY" but ends "PUBLIC KEZ"`},
		{"public key", [][]byte{[]byte("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n-----END RSA KEY-----\n")}, `public key: block 1 begins "PUBLIC KEY" but ends "RSA KEY"`},
		{"public key", [][]byte{[]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")}, `public key: block 1 is "CERTIFICATE", not an Ed25519 "PUBLIC KEY"`},
		{"public key", [][]byte{[]byte("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHUR==\n-----END PUBLIC KEY-----\n")}, "public key: block 1 is not a well-formed Ed25519 public key (ed25519 public key: not an Ed25519 SubjectPublicKeyInfo)"},
		{"public key", [][]byte{[]byte("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2Vw!AyEA\n-----END PUBLIC KEY-----\n")}, `(ed25519 public key: expected a PEM "PUBLIC KEY" block)`},
		// An RSA SubjectPublicKeyInfo is a PUBLIC KEY block, but not Ed25519.
		{"public key", [][]byte{[]byte("-----BEGIN PUBLIC KEY-----\nMFwwDQYJKoZIhvcNAQEBBQADSwAwSAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8QuKUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAwEAAQ==\n-----END PUBLIC KEY-----\n")}, "not an Ed25519 SubjectPublicKeyInfo"},
		{"public key", [][]byte{[]byte("just some text")}, `public key: no PEM "PUBLIC KEY" block`},
		{"public key", [][]byte{[]byte("")}, `public key: no PEM "PUBLIC KEY" block`},
		{"public key", [][]byte{bytes.Repeat([]byte{0xff}, 31)}, `public key: expected 32 raw Ed25519 bytes or a PEM "PUBLIC KEY"`},
		{"public key", nil, "public key: no keys given"},
		{"offline.publicKey", [][]byte{[]byte(firstPEM + firstPEM)}, "offline.publicKey: key 21fe31dfa154a261 appears twice"},
		{"offline.publicKey", [][]byte{first, []byte(firstPEM)}, "offline.publicKey: key 21fe31dfa154a261 appears twice"},
	}
	for _, c := range cases {
		_, err := ParseKeySetFrom(c.source, c.parts...)
		refusedWith(t, err, CodePublicKeyInvalid, c.want)
	}
}

func TestKeyIDs(t *testing.T) {
	for _, s := range []string{"21fe31dfa154a261", "0000000000000000"} {
		if !IsKeyID(s) {
			t.Fatal(s)
		}
	}
	for _, s := range []string{"21FE31DFA154A261", "21fe31dfa154a26", "c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d", ""} {
		if IsKeyID(s) {
			t.Fatal(s)
		}
	}
	pub := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)).Public().(ed25519.PublicKey)
	if len(KeyIDOf(pub)) != 16 {
		t.Fatal("key id length")
	}
}
