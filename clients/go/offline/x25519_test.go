package offline

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"testing"
)

type x25519Vectors struct {
	Single []struct {
		Scalar string `json:"scalar"`
		U      string `json:"u"`
		Output string `json:"output"`
	} `json:"single"`
	Iterated      map[string]string `json:"iterated"`
	DiffieHellman struct {
		AlicePrivate string `json:"alice_private"`
		AlicePublic  string `json:"alice_public"`
		BobPrivate   string `json:"bob_private"`
		BobPublic    string `json:"bob_public"`
		Shared       string `json:"shared"`
	} `json:"diffie_hellman"`
}

func loadX25519Vectors(t *testing.T) *x25519Vectors {
	t.Helper()
	var v x25519Vectors
	if err := json.Unmarshal(readVectorFile(t, "x25519-rfc7748.json"), &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

// RFC 7748 section 5.2: the two single computations.
func TestX25519RFC7748Single(t *testing.T) {
	v := loadX25519Vectors(t)
	if len(v.Single) != 2 {
		t.Fatalf("%d single vectors", len(v.Single))
	}
	for _, s := range v.Single {
		out, err := X25519(mustHex(t, s.Scalar), mustHex(t, s.U))
		if err != nil || hex.EncodeToString(out) != s.Output {
			t.Fatalf("X25519(%s, %s) = %x, %v; want %s", s.Scalar, s.U, out, err, s.Output)
		}
	}
}

// RFC 7748 section 5.2, the iterated test: k = u = 9; k, u = X25519(k, u), k.
func TestX25519RFC7748Iterated(t *testing.T) {
	v := loadX25519Vectors(t)
	k := make([]byte, 32)
	k[0] = 9
	u := append([]byte(nil), k...)
	for i := 1; i <= 1000; i++ {
		out, err := X25519(k, u)
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		u, k = k, out
		if i == 1 && hex.EncodeToString(k) != v.Iterated["1"] {
			t.Fatalf("after 1 iteration: %x", k)
		}
	}
	if hex.EncodeToString(k) != v.Iterated["1000"] {
		t.Fatalf("after 1000 iterations: %x", k)
	}
}

// RFC 7748 section 6.1: both public keys and the shared secret, computed from both sides.
func TestX25519RFC7748DiffieHellman(t *testing.T) {
	d := loadX25519Vectors(t).DiffieHellman
	alicePublic, err := X25519PublicKey(mustHex(t, d.AlicePrivate))
	if err != nil || hex.EncodeToString(alicePublic) != d.AlicePublic {
		t.Fatalf("Alice's public key %x %v", alicePublic, err)
	}
	bobPublic, err := X25519PublicKey(mustHex(t, d.BobPrivate))
	if err != nil || hex.EncodeToString(bobPublic) != d.BobPublic {
		t.Fatalf("Bob's public key %x %v", bobPublic, err)
	}
	ab, err1 := X25519(mustHex(t, d.AlicePrivate), bobPublic)
	ba, err2 := X25519(mustHex(t, d.BobPrivate), alicePublic)
	if err1 != nil || err2 != nil || hex.EncodeToString(ab) != d.Shared || !bytes.Equal(ab, ba) {
		t.Fatalf("shared %x / %x (%v %v), want %s", ab, ba, err1, err2, d.Shared)
	}
}

func TestX25519RefusesSmallOrderPointsAndBadLengths(t *testing.T) {
	private, _, err := GenerateX25519()
	if err != nil {
		t.Fatal(err)
	}
	one := make([]byte, 32)
	one[0] = 1
	for _, point := range [][]byte{make([]byte, 32), one} {
		if _, err := X25519(private, point); err == nil {
			t.Fatalf("X25519 with the small-order point %x gave no error", point)
		}
	}
	if _, err := X25519(private[:31], one); err == nil {
		t.Fatal("a 31-byte scalar was taken")
	}
	if _, err := X25519PublicKey(make([]byte, 33)); err == nil {
		t.Fatal("a 33-byte private key was taken")
	}
}

// The top bit of u is ignored and a non-canonical u (p..2^255-1) is reduced (RFC 7748 section 5).
func TestX25519NonCanonicalU(t *testing.T) {
	d := loadX25519Vectors(t).DiffieHellman
	bob := mustHex(t, d.BobPublic)
	withTopBit := append([]byte(nil), bob...)
	withTopBit[31] |= 0x80
	a, _ := X25519(mustHex(t, d.AlicePrivate), bob)
	b, _ := X25519(mustHex(t, d.AlicePrivate), withTopBit)
	if !bytes.Equal(a, b) {
		t.Fatal("the top bit of u changed the result")
	}
	// u = p + 9 is 9 (the base point).
	pPlus9 := []byte{0xed + 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
	viaP, _ := X25519(mustHex(t, d.AlicePrivate), pPlus9)
	if hex.EncodeToString(viaP) != d.AlicePublic {
		t.Fatalf("u = p + 9 gave %x, want Alice's public key", viaP)
	}
}

func TestGenerateX25519(t *testing.T) {
	aPrivate, aPublic, err := GenerateX25519()
	if err != nil {
		t.Fatal(err)
	}
	bPrivate, bPublic, err := GenerateX25519()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(aPrivate, bPrivate) || len(aPublic) != 32 {
		t.Fatal("two key pairs are the same, or a public key is not 32 bytes")
	}
	ab, _ := X25519(aPrivate, bPublic)
	ba, _ := X25519(bPrivate, aPublic)
	if !bytes.Equal(ab, ba) {
		t.Fatal("the two sides disagree")
	}
}
