package offline

import (
	"encoding/base64"
)

// DecodeBase64Strict decodes standard Base64 (RFC 4648 section 4) with padding, and only
// the canonical encoding of the bytes: the unused low bits of the last symbol must be
// zero. Whitespace, Base64url, missing padding and text after the padding are refused
// (ok is false). Go's decoder skips CR and LF by itself, so the alphabet is checked first.
func DecodeBase64Strict(text string) (data []byte, ok bool) {
	if len(text)%4 != 0 {
		return nil, false
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
		case c == '=':
			// Only as the last one or two characters.
			if i < len(text)-2 || (i == len(text)-2 && text[len(text)-1] != '=') {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	data, err := base64.StdEncoding.Strict().DecodeString(text)
	if err != nil || base64.StdEncoding.EncodeToString(data) != text {
		return nil, false
	}
	return data, true
}

// EncodeBase64 is standard Base64 with padding.
func EncodeBase64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }
