package client

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf16"
)

// The license key alphabet: Crockford's Base32, seven groups of four.
const keyAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// isJSSpace is JavaScript's white space and line terminators (\s): Go's unicode.IsSpace and
// U+FEFF, but not U+0085 (NEL), which JavaScript does not count as space.
func isJSSpace(r rune) bool { return (unicode.IsSpace(r) && r != '\u0085') || r == '\uFEFF' }

// trimJS is JavaScript's String.prototype.trim.
func trimJS(s string) string { return strings.TrimFunc(s, isJSSpace) }

// normalizeLicenseKey is the canonical form of a key as a person might type it
// (case-insensitive, spaces ignored, O read as 0, I and L as 1), or "" when it cannot be
// a key of the server's.
func normalizeLicenseKey(input string) string {
	var symbols []rune
	for _, r := range strings.ToUpper(input) {
		switch {
		case isJSSpace(r) || r == '-':
			continue
		case r == 'O':
			r = '0'
		case r == 'I' || r == 'L':
			r = '1'
		}
		if !strings.ContainsRune(keyAlphabet, r) {
			return ""
		}
		symbols = append(symbols, r)
	}
	if len(symbols) != 28 {
		return ""
	}
	groups := make([]string, 7)
	for i := range groups {
		groups[i] = string(symbols[i*4 : i*4+4])
	}
	return strings.Join(groups, "-")
}

// licenseKeyPrefix is the spec's license_key_prefix of a key: its first 8 characters as
// written, hyphen included, after normalisation.
func licenseKeyPrefix(key string) string {
	normalized := normalizeLicenseKey(key)
	if normalized == "" {
		normalized = strings.ToUpper(key)
	}
	units := utf16.Encode([]rune(normalized))
	if len(units) > 8 {
		units = units[:8]
	}
	return string(utf16.Decode(units))
}

// cacheID names a license's cache directory: the first 16 hex digits of SHA-256 over the
// key in upper case without hyphens and white space (as the Node client does, so both
// share a cache).
func cacheID(licenseKey string) string {
	key := strings.Map(func(r rune) rune {
		if isJSSpace(r) || r == '-' {
			return -1
		}
		return r
	}, strings.ToUpper(licenseKey))
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:16]
}
