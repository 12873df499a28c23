package offline

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Strings parsed from JSON are kept in Go strings. JSON can name a lone UTF-16 surrogate
// (an escape such as \ud800 without its pair), which JavaScript keeps in its strings and
// UTF-8 cannot hold; such a code unit is kept as its 3-byte generalised UTF-8 form
// (WTF-8: ED A0 80 - ED BF BF), so that canonicalisation writes it back as the escape
// JSON.stringify writes. Valid UTF-8 input never contains those bytes.

// decodeWTF8 decodes one code point (or lone surrogate) at the start of s.
func decodeWTF8(s string) (rune, int) {
	if len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2] >= 0x80 && s[2] <= 0xBF {
		return rune(0xD000 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F)), 3
	}
	return utf8.DecodeRuneInString(s)
}

func appendWTF8(b []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
	return utf8.AppendRune(b, r)
}

// utf16Units returns s as UTF-16 code units, the way JavaScript sees the string.
func utf16Units(s string) []uint16 {
	units := make([]uint16, 0, len(s))
	for i := 0; i < len(s); {
		r, n := decodeWTF8(s[i:])
		i += n
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			units = append(units, uint16(hi), uint16(lo))
		} else {
			units = append(units, uint16(r))
		}
	}
	return units
}

// utf16Length is JavaScript's string.length.
func utf16Length(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := decodeWTF8(s[i:])
		i += size
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// compareUTF16 orders strings as JavaScript's < does: by UTF-16 code units.
func compareUTF16(a, b string) int {
	ua, ub := utf16Units(a), utf16Units(b)
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			if ua[i] < ub[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(ua) < len(ub):
		return -1
	case len(ua) > len(ub):
		return 1
	}
	return 0
}

// toUTF8 is TextEncoder.encode: lone surrogates become U+FFFD.
func toUTF8(s string) string {
	if !hasLoneSurrogate(s) {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		r, n := decodeWTF8(s[i:])
		i += n
		if r >= 0xD800 && r <= 0xDFFF {
			r = utf8.RuneError
		}
		out = utf8.AppendRune(out, r)
	}
	return string(out)
}

func hasLoneSurrogate(s string) bool {
	for i := 0; i < len(s); {
		r, n := decodeWTF8(s[i:])
		if r >= 0xD800 && r <= 0xDFFF {
			return true
		}
		i += n
	}
	return false
}
