package offline

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/hex"
	"encoding/json"
	"testing"
)

type hpkeVector struct {
	Mode               int    `json:"mode"`
	KemID              int    `json:"kem_id"`
	KdfID              int    `json:"kdf_id"`
	AeadID             int    `json:"aead_id"`
	Info               string `json:"info"`
	SkRm               string `json:"skRm"`
	SkEm               string `json:"skEm"`
	PkRm               string `json:"pkRm"`
	PkEm               string `json:"pkEm"`
	Enc                string `json:"enc"`
	SharedSecret       string `json:"shared_secret"`
	KeyScheduleContext string `json:"key_schedule_context"`
	Secret             string `json:"secret"`
	Key                string `json:"key"`
	BaseNonce          string `json:"base_nonce"`
	ExporterSecret     string `json:"exporter_secret"`
	Encryptions        []struct {
		Aad        string `json:"aad"`
		Ciphertext string `json:"ciphertext"`
		Plaintext  string `json:"plaintext"`
	} `json:"encryptions"`
}

func loadHPKEVector(t *testing.T) *hpkeVector {
	t.Helper()
	var v hpkeVector
	if err := json.Unmarshal(readVectorFile(t, "hpke-rfc9180.json"), &v); err != nil {
		t.Fatal(err)
	}
	if v.Mode != 0 || v.KemID != HPKEKemID || v.KdfID != HPKEKdfID || v.AeadID != HPKEAeadID {
		t.Fatalf("the vector is for mode %d, suite %d/%d/%d", v.Mode, v.KemID, v.KdfID, v.AeadID)
	}
	return &v
}

// RFC 9180's vector for mode_base, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM:
// every intermediate value, then SealBase and OpenBase.
func TestHPKERFC9180Vector(t *testing.T) {
	v := loadHPKEVector(t)
	for _, pair := range [][2]string{{v.SkEm, v.PkEm}, {v.SkRm, v.PkRm}} {
		public, err := X25519PublicKey(mustHex(t, pair[0]))
		if err != nil || hex.EncodeToString(public) != pair[1] {
			t.Fatalf("public key of %s: %x %v", pair[0], public, err)
		}
	}
	shared, enc, err := hpkeEncap(mustHex(t, v.PkRm), mustHex(t, v.SkEm))
	if err != nil || hex.EncodeToString(enc) != v.Enc || hex.EncodeToString(shared) != v.SharedSecret {
		t.Fatalf("Encap: enc %x shared_secret %x %v", enc, shared, err)
	}
	decapped, err := hpkeDecap(mustHex(t, v.Enc), mustHex(t, v.SkRm))
	if err != nil || hex.EncodeToString(decapped) != v.SharedSecret {
		t.Fatalf("Decap: %x %v", decapped, err)
	}
	s := hpkeKeyScheduleBase(shared, mustHex(t, v.Info))
	for _, check := range []struct {
		name      string
		got, want string
	}{
		{"key_schedule_context", hex.EncodeToString(s.context), v.KeyScheduleContext},
		{"secret", hex.EncodeToString(s.secret), v.Secret},
		{"key", hex.EncodeToString(s.key), v.Key},
		{"base_nonce", hex.EncodeToString(s.baseNonce), v.BaseNonce},
		{"exporter_secret", hex.EncodeToString(s.exporterSecret), v.ExporterSecret},
	} {
		if check.got != check.want {
			t.Fatalf("%s = %s, want %s", check.name, check.got, check.want)
		}
	}

	first := v.Encryptions[0]
	gotEnc, ct, err := HPKESealBase(mustHex(t, v.PkRm), mustHex(t, v.Info), mustHex(t, first.Aad), mustHex(t, first.Plaintext), mustHex(t, v.SkEm))
	if err != nil || hex.EncodeToString(gotEnc) != v.Enc || hex.EncodeToString(ct) != first.Ciphertext {
		t.Fatalf("SealBase: enc %x ct %x %v", gotEnc, ct, err)
	}
	pt, err := HPKEOpenBase(mustHex(t, v.Enc), mustHex(t, v.SkRm), mustHex(t, v.Info), mustHex(t, first.Aad), mustHex(t, first.Ciphertext))
	if err != nil || hex.EncodeToString(pt) != first.Plaintext {
		t.Fatalf("OpenBase: %x %v", pt, err)
	}

	// The later encryptions use nonce = base_nonce XOR seq (section 5.2): the schedule is the RFC's.
	block, _ := aes.NewCipher(s.key)
	aead, _ := cipher.NewGCM(block)
	for seq, e := range v.Encryptions {
		nonce := append([]byte(nil), s.baseNonce...)
		nonce[len(nonce)-1] ^= byte(seq)
		if got := hex.EncodeToString(aead.Seal(nil, nonce, mustHex(t, e.Plaintext), mustHex(t, e.Aad))); got != e.Ciphertext {
			t.Fatalf("encryptions[%d] = %s", seq, got)
		}
	}
}

func TestHPKEOpenRefusesWhatDoesNotMatch(t *testing.T) {
	v := loadHPKEVector(t)
	first := v.Encryptions[0]
	enc, skR, info, aad, ct := mustHex(t, v.Enc), mustHex(t, v.SkRm), mustHex(t, v.Info), mustHex(t, first.Aad), mustHex(t, first.Ciphertext)
	flip := func(b []byte, at int) []byte {
		c := append([]byte(nil), b...)
		c[at] ^= 0x80
		return c
	}
	cases := map[string][5][]byte{
		"another private key": {enc, mustHex(t, v.SkEm), info, aad, ct},
		"another info":        {enc, skR, []byte("another info"), aad, ct},
		"another aad":         {enc, skR, info, []byte("Count-1"), ct},
		"changed enc":         {flip(enc, 0), skR, info, aad, ct},
		"changed ciphertext":  {enc, skR, info, aad, flip(ct, 0)},
		"changed tag":         {enc, skR, info, aad, flip(ct, len(ct)-1)},
		"truncated":           {enc, skR, info, aad, ct[:15]},
	}
	for name, c := range cases {
		if pt, err := HPKEOpenBase(c[0], c[1], c[2], c[3], c[4]); err == nil {
			t.Fatalf("%s: opened to %x", name, pt)
		}
	}
	if _, _, err := HPKESealBase(make([]byte, 32), info, nil, []byte("x"), nil); err == nil {
		t.Fatal("sealed to the all-zero (small-order) public key")
	}
}

func TestHPKERoundTripWithFreshKeys(t *testing.T) {
	private, public, err := GenerateX25519()
	if err != nil {
		t.Fatal(err)
	}
	info := []byte("license-server/v2/machine-key\nid\nhw")
	plaintext := bytes.Repeat([]byte{7}, 32)
	enc1, ct1, err := HPKESealBase(public, info, nil, plaintext, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc2, _, _ := HPKESealBase(public, info, nil, plaintext, nil)
	if bytes.Equal(enc1, enc2) || len(ct1) != 48 {
		t.Fatal("two seals share an ephemeral key, or the ciphertext is not 48 bytes")
	}
	if pt, err := HPKEOpenBase(enc1, private, info, nil, ct1); err != nil || !bytes.Equal(pt, plaintext) {
		t.Fatalf("open: %x %v", pt, err)
	}
}
