package client

import (
	"crypto/rand"
	"encoding/hex"
	"math/big"
	"testing"
)

// Go 1.19's standard library has no X25519 and offline.GenerateX25519 is MACHINEKEY's
// (x25519.go): until it is in this build, the tests make machine keys with this plain
// RFC 7748 section 5 ladder over math/big (slow, not constant-time: for tests only),
// itself checked against the RFC's section 6.1 vector.
func init() {
	if machineKeyPair == nil {
		machineKeyPair = testX25519KeyPair
	}
}

var curveP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

func littleEndian(b []byte) *big.Int {
	reversed := make([]byte, len(b))
	for i := range b {
		reversed[len(b)-1-i] = b[i]
	}
	return new(big.Int).SetBytes(reversed)
}

func testX25519(scalar, point []byte) []byte {
	k := append([]byte(nil), scalar...)
	k[0] &= 248
	k[31] &= 127
	k[31] |= 64
	u := append([]byte(nil), point...)
	u[31] &= 127
	kInt, x1 := littleEndian(k), new(big.Int).Mod(littleEndian(u), curveP)
	x2, z2, x3, z3 := big.NewInt(1), big.NewInt(0), new(big.Int).Set(x1), big.NewInt(1)
	mod := func(v *big.Int) *big.Int { return v.Mod(v, curveP) }
	mul := func(a, b *big.Int) *big.Int { return mod(new(big.Int).Mul(a, b)) }
	swap := uint(0)
	for t := 254; t >= 0; t-- {
		bit := kInt.Bit(t)
		if swap^bit == 1 {
			x2, x3, z2, z3 = x3, x2, z3, z2
		}
		swap = bit
		a, b := mod(new(big.Int).Add(x2, z2)), mod(new(big.Int).Sub(x2, z2))
		aa, bb := mul(a, a), mul(b, b)
		e := mod(new(big.Int).Sub(aa, bb))
		c, d := mod(new(big.Int).Add(x3, z3)), mod(new(big.Int).Sub(x3, z3))
		da, cb := mul(d, a), mul(c, b)
		sum, diff := mod(new(big.Int).Add(da, cb)), mod(new(big.Int).Sub(da, cb))
		x3, z3 = mul(sum, sum), mul(x1, mul(diff, diff))
		x2, z2 = mul(aa, bb), mul(e, mod(new(big.Int).Add(aa, mul(big.NewInt(121665), e))))
	}
	if swap == 1 {
		x2, z2 = x3, z3
	}
	out := mul(x2, new(big.Int).Exp(z2, new(big.Int).Sub(curveP, big.NewInt(2)), curveP)).Bytes()
	result := make([]byte, 32)
	for i := range out {
		result[i] = out[len(out)-1-i]
	}
	return result
}

func testX25519KeyPair() ([]byte, []byte, error) {
	private := make([]byte, 32)
	if _, err := rand.Read(private); err != nil {
		return nil, nil, err
	}
	base := make([]byte, 32)
	base[0] = 9
	return private, testX25519(private, base), nil
}

func TestTestX25519IsRFC7748(t *testing.T) {
	private, _ := hex.DecodeString("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
	base := make([]byte, 32)
	base[0] = 9
	if got := hex.EncodeToString(testX25519(private, base)); got != "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a" {
		t.Fatal(got)
	}
}
