package offline

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/bits"
)

// X25519 as RFC 7748 defines it, for Go 1.19, whose standard library has no crypto/ecdh.
// The field GF(2^255 - 19) is held in five 51-bit limbs; every operation on secret data
// runs the same instructions whatever the values (no branch and no table index depends on
// a secret), and the Montgomery ladder swaps with a mask, not a branch.

// X25519KeyLength is the length of an X25519 private key, public key and shared secret.
const X25519KeyLength = 32

const mask51 = (uint64(1) << 51) - 1

// fieldElement is a + b·2^51 + c·2^102 + d·2^153 + e·2^204; limbs may exceed 51 bits
// between operations (each operation below leaves them under 2^52).
type fieldElement [5]uint64

func feFromBytes(b *[32]byte) fieldElement {
	// RFC 7748 section 5: the most significant bit of the u-coordinate is ignored; a
	// non-canonical value (p to 2^255 - 1) is used as is and reduced by the arithmetic.
	return fieldElement{
		binary.LittleEndian.Uint64(b[0:8]) & mask51,
		(binary.LittleEndian.Uint64(b[6:14]) >> 3) & mask51,
		(binary.LittleEndian.Uint64(b[12:20]) >> 6) & mask51,
		(binary.LittleEndian.Uint64(b[19:27]) >> 1) & mask51,
		(binary.LittleEndian.Uint64(b[24:32]) >> 12) & mask51,
	}
}

// carry brings every limb under 2^51 + 2^18, folding the carry out of the top limb back
// in times 19 (2^255 = 19 mod p).
func (v *fieldElement) carry() {
	c0, c1, c2, c3, c4 := v[0]>>51, v[1]>>51, v[2]>>51, v[3]>>51, v[4]>>51
	v[0] = v[0]&mask51 + c4*19
	v[1] = v[1]&mask51 + c0
	v[2] = v[2]&mask51 + c1
	v[3] = v[3]&mask51 + c2
	v[4] = v[4]&mask51 + c3
}

// bytes is the canonical little-endian encoding (fully reduced mod p).
func (v fieldElement) bytes() [32]byte {
	v.carry()
	// v < 2^255 + 2^18·19 now; subtract p once if v >= p: q is 1 exactly when v + 19 >= 2^255.
	q := (v[0] + 19) >> 51
	q = (v[1] + q) >> 51
	q = (v[2] + q) >> 51
	q = (v[3] + q) >> 51
	q = (v[4] + q) >> 51
	v[0] += 19 * q
	v[1] += v[0] >> 51
	v[0] &= mask51
	v[2] += v[1] >> 51
	v[1] &= mask51
	v[3] += v[2] >> 51
	v[2] &= mask51
	v[4] += v[3] >> 51
	v[3] &= mask51
	v[4] &= mask51 // drops the 2^255 that stands for the p subtracted

	var out [32]byte
	for i, limb := range v {
		offset := i * 51
		var word [8]byte
		binary.LittleEndian.PutUint64(word[:], limb<<uint(offset%8))
		for j, b := range word {
			if at := offset/8 + j; at < len(out) {
				out[at] |= b
			}
		}
	}
	return out
}

func feAdd(a, b fieldElement) fieldElement {
	v := fieldElement{a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4]}
	v.carry()
	return v
}

// feSub adds 2p before subtracting, so that no limb goes below zero (b's limbs are under 2^52 - 38).
func feSub(a, b fieldElement) fieldElement {
	v := fieldElement{
		a[0] + 0xFFFFFFFFFFFDA - b[0],
		a[1] + 0xFFFFFFFFFFFFE - b[1],
		a[2] + 0xFFFFFFFFFFFFE - b[2],
		a[3] + 0xFFFFFFFFFFFFE - b[3],
		a[4] + 0xFFFFFFFFFFFFE - b[4],
	}
	v.carry()
	return v
}

type uint128 struct{ lo, hi uint64 }

func mul64(a, b uint64) uint128 {
	hi, lo := bits.Mul64(a, b)
	return uint128{lo, hi}
}

func addMul64(v uint128, a, b uint64) uint128 {
	hi, lo := bits.Mul64(a, b)
	lo, c := bits.Add64(lo, v.lo, 0)
	hi, _ = bits.Add64(hi, v.hi, c)
	return uint128{lo, hi}
}

func shiftRight51(v uint128) uint64 { return v.hi<<(64-51) | v.lo>>51 }

// feMul is schoolbook multiplication with the limbs above 2^255 folded back times 19.
// With limbs under 2^52 each sum is under 2^111 (r4, which has no 19, under 2^107), so
// the carries fit: c0..c3 < 2^60, c4·19 < 2^61.
func feMul(a, b fieldElement) fieldElement {
	b1, b2, b3, b4 := b[1]*19, b[2]*19, b[3]*19, b[4]*19
	r0 := mul64(a[0], b[0])
	r0 = addMul64(r0, a[1], b4)
	r0 = addMul64(r0, a[2], b3)
	r0 = addMul64(r0, a[3], b2)
	r0 = addMul64(r0, a[4], b1)

	r1 := mul64(a[0], b[1])
	r1 = addMul64(r1, a[1], b[0])
	r1 = addMul64(r1, a[2], b4)
	r1 = addMul64(r1, a[3], b3)
	r1 = addMul64(r1, a[4], b2)

	r2 := mul64(a[0], b[2])
	r2 = addMul64(r2, a[1], b[1])
	r2 = addMul64(r2, a[2], b[0])
	r2 = addMul64(r2, a[3], b4)
	r2 = addMul64(r2, a[4], b3)

	r3 := mul64(a[0], b[3])
	r3 = addMul64(r3, a[1], b[2])
	r3 = addMul64(r3, a[2], b[1])
	r3 = addMul64(r3, a[3], b[0])
	r3 = addMul64(r3, a[4], b4)

	r4 := mul64(a[0], b[4])
	r4 = addMul64(r4, a[1], b[3])
	r4 = addMul64(r4, a[2], b[2])
	r4 = addMul64(r4, a[3], b[1])
	r4 = addMul64(r4, a[4], b[0])

	c0, c1, c2, c3, c4 := shiftRight51(r0), shiftRight51(r1), shiftRight51(r2), shiftRight51(r3), shiftRight51(r4)
	v := fieldElement{
		r0.lo&mask51 + c4*19,
		r1.lo&mask51 + c0,
		r2.lo&mask51 + c1,
		r3.lo&mask51 + c2,
		r4.lo&mask51 + c3,
	}
	v.carry()
	return v
}

func feSquare(a fieldElement) fieldElement { return feMul(a, a) }

// feInvert is a^(p-2) (Fermat). The exponent is public, so walking its bits is not a leak.
func feInvert(a fieldElement) fieldElement {
	// p - 2 = 2^255 - 21: bits 254..5 are one, bits 4..0 are 01011.
	result := fieldElement{1}
	for i := 254; i >= 0; i-- {
		result = feSquare(result)
		if i >= 5 || (0b01011>>uint(i))&1 == 1 {
			result = feMul(result, a)
		}
	}
	return result
}

// feSwap exchanges a and b when swap is 1 and leaves them when it is 0, by mask.
func feSwap(a, b *fieldElement, swap uint64) {
	mask := -swap
	for i := range a {
		t := mask & (a[i] ^ b[i])
		a[i] ^= t
		b[i] ^= t
	}
}

// x25519 is the function X25519(k, u) of RFC 7748 section 5: the scalar is clamped, the
// u-coordinate decoded, and the Montgomery ladder runs all 255 steps.
func x25519(scalar, point *[32]byte) [32]byte {
	k := *scalar
	k[0] &= 248
	k[31] &= 127
	k[31] |= 64

	x1 := feFromBytes(point)
	x2, z2 := fieldElement{1}, fieldElement{}
	x3, z3 := x1, fieldElement{1}
	a24 := fieldElement{121665}
	var swap uint64
	for t := 254; t >= 0; t-- {
		bit := uint64(k[t/8]>>uint(t%8)) & 1
		swap ^= bit
		feSwap(&x2, &x3, swap)
		feSwap(&z2, &z3, swap)
		swap = bit

		a := feAdd(x2, z2)
		aa := feSquare(a)
		b := feSub(x2, z2)
		bb := feSquare(b)
		e := feSub(aa, bb)
		c := feAdd(x3, z3)
		d := feSub(x3, z3)
		da := feMul(d, a)
		cb := feMul(c, b)
		x3 = feSquare(feAdd(da, cb))
		z3 = feMul(x1, feSquare(feSub(da, cb)))
		x2 = feMul(aa, bb)
		z2 = feMul(e, feAdd(aa, feMul(a24, e)))
	}
	feSwap(&x2, &x3, swap)
	feSwap(&z2, &z3, swap)
	for i := range k {
		k[i] = 0
	}
	return feMul(x2, feInvert(z2)).bytes()
}

var x25519BasePoint = [32]byte{9}

// X25519 computes X25519(scalar, point) of RFC 7748 section 5. It returns an error for
// inputs that are not 32 bytes and for an all-zero result (point of small order), which
// RFC 7748 section 6.1 lets a protocol refuse and RFC 9180 requires it to.
func X25519(scalar, point []byte) ([]byte, error) {
	if len(scalar) != X25519KeyLength || len(point) != X25519KeyLength {
		return nil, errors.New("x25519: the scalar and the point must be 32 bytes each")
	}
	var k, u [32]byte
	copy(k[:], scalar)
	copy(u[:], point)
	out := x25519(&k, &u)
	for i := range k {
		k[i] = 0
	}
	var zero byte
	for _, b := range out {
		zero |= b
	}
	if zero == 0 {
		return nil, errors.New("x25519: the result is all zeros (a point of small order)")
	}
	return out[:], nil
}

// X25519PublicKey is the public key of a 32-byte X25519 private key: X25519(private, 9).
func X25519PublicKey(private []byte) ([]byte, error) {
	if len(private) != X25519KeyLength {
		return nil, errors.New("x25519: the private key must be 32 bytes")
	}
	return X25519(private, x25519BasePoint[:])
}

// GenerateX25519 makes a fresh X25519 key pair: 32 bytes from crypto/rand as the private
// key (X25519 clamps it when it is used), and its public key.
func GenerateX25519() (private, public []byte, err error) {
	private = make([]byte, X25519KeyLength)
	if _, err = rand.Read(private); err != nil {
		return nil, nil, err
	}
	public, err = X25519PublicKey(private)
	if err != nil {
		return nil, nil, err
	}
	return private, public, nil
}

// SmallOrderPoints are the 32-byte encodings of the X25519 points of small order (RFC 7748
// section 7), as libsodium's blacklist and Wycheproof's x25519 vectors list them: u = 0, 1,
// the two u-coordinates of order 8, p - 1, and p and p + 1 (which X25519 reduces to 0 and
// 1). X25519 of any private key with one of them is all zeros, so no key pair has one as
// its public key (docs/offline-license-format.md section 12).
var SmallOrderPoints = []string{
	"0000000000000000000000000000000000000000000000000000000000000000",
	"0100000000000000000000000000000000000000000000000000000000000000",
	"e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
	"5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
}

// IsSmallOrderPoint reports whether a 32-byte X25519 public key is one of SmallOrderPoints,
// compared with the top bit of its last byte cleared, as RFC 7748 section 5 decodes a
// u-coordinate: with that bit set it is the same point.
func IsSmallOrderPoint(public []byte) bool {
	if len(public) != X25519KeyLength {
		return false
	}
	masked := append([]byte(nil), public...)
	masked[31] &= 0x7f
	text := hex.EncodeToString(masked)
	for _, point := range SmallOrderPoints {
		if text == point {
			return true
		}
	}
	return false
}
