package offline

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// VerificationKey is one Ed25519 public key of a key set, named by its key id.
type VerificationKey struct {
	// KeyID is KeyIDOf(PublicKey): 16 lower-case hex digits.
	KeyID     string
	PublicKey ed25519.PublicKey
}

// KeySet is the set of public keys a verifier trusts, in the order given.
type KeySet []VerificationKey

// KeyIDs lists the set's key ids in order.
func (s KeySet) KeyIDs() []string {
	ids := make([]string, len(s))
	for i, k := range s {
		ids[i] = k.KeyID
	}
	return ids
}

// KeyIDOf is the key id of a raw 32-byte Ed25519 public key: the lower-case hex of the
// first 8 bytes of its SHA-256 (docs/offline-license-format.md section 6).
func KeyIDOf(publicKey []byte) string {
	sum := sha256.Sum256(publicKey)
	return hex.EncodeToString(sum[:8])
}

var keyIDPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// IsKeyID reports whether s has the form of a key id (16 lower-case hex digits).
func IsKeyID(s string) bool { return keyIDPattern.MatchString(s) }

// spkiPrefix is the fixed DER prefix of an RFC 8410 Ed25519 SubjectPublicKeyInfo.
var spkiPrefix = []byte{0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00}

// PublicKeyToPEM writes a raw 32-byte key as a PEM "PUBLIC KEY" block.
func PublicKeyToPEM(publicKey []byte) (string, error) {
	if len(publicKey) != ed25519.PublicKeySize {
		return "", fmt.Errorf("ed25519 public key: expected 32 bytes, got %d", len(publicKey))
	}
	der := append(append([]byte(nil), spkiPrefix...), publicKey...)
	text := base64.StdEncoding.EncodeToString(der)
	var b strings.Builder
	b.WriteString("-----BEGIN PUBLIC KEY-----\n")
	for len(text) > 64 {
		b.WriteString(text[:64] + "\n")
		text = text[64:]
	}
	b.WriteString(text + "\n-----END PUBLIC KEY-----\n")
	return b.String(), nil
}

// jsSpace is JavaScript's \s, wider than RE2's.
const jsSpace = `\t\n\x{0B}\f\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}`

var (
	pemBlock     = regexp.MustCompile(`-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END ([A-Z0-9 ]+)-----`)
	publicKeyPEM = regexp.MustCompile(`-----BEGIN PUBLIC KEY-----([A-Za-z0-9+/=` + jsSpace + `]+)-----END PUBLIC KEY-----`)
	jsSpaces     = regexp.MustCompile(`[` + jsSpace + `]+`)
)

// PublicKeyFromPEM returns the 32 raw key bytes of a PEM "PUBLIC KEY" block holding an
// Ed25519 SubjectPublicKeyInfo (the first such block of the text).
func PublicKeyFromPEM(pemText string) (ed25519.PublicKey, error) {
	m := publicKeyPEM.FindStringSubmatch(pemText)
	if m == nil {
		return nil, errors.New(`ed25519 public key: expected a PEM "PUBLIC KEY" block`)
	}
	der := decodeBase64Lenient(jsSpaces.ReplaceAllString(m[1], ""))
	if len(der) != len(spkiPrefix)+ed25519.PublicKeySize || !bytes.Equal(der[:len(spkiPrefix)], spkiPrefix) {
		return nil, errors.New("ed25519 public key: not an Ed25519 SubjectPublicKeyInfo")
	}
	return ed25519.PublicKey(append([]byte(nil), der[len(spkiPrefix):]...)), nil
}

// decodeBase64Lenient decodes as Node's Buffer.from(text, "base64") does for PEM bodies:
// it stops at the first "=" and ignores a trailing partial symbol.
func decodeBase64Lenient(text string) []byte {
	if i := strings.IndexByte(text, '='); i >= 0 {
		text = text[:i]
	}
	if len(text)%4 == 1 {
		text = text[:len(text)-1]
	}
	data, err := base64.RawStdEncoding.DecodeString(text)
	if err != nil {
		return nil
	}
	return data
}

func keySetInvalid(format string, args ...any) *Error {
	return newError(CodePublicKeyInvalid, format, args...)
}

// keysOfPEM reads every PEM block of text as an Ed25519 public key. Text between blocks
// is ignored; a block that is not a public key is refused by its number, a private key
// named as such; a block cut short is refused rather than silently dropped.
func keysOfPEM(text, source string) (KeySet, error) {
	var keys KeySet
	block := 0
	for _, m := range pemBlock.FindAllStringSubmatch(text, -1) {
		block++
		whole, label, endLabel := m[0], m[1], m[3]
		if strings.Contains(label, "PRIVATE KEY") {
			return nil, keySetInvalid("%s: block %d is a private key (%q); a key set holds public keys only (`signing-key show --all` prints one)", source, block, label)
		}
		if endLabel != label {
			return nil, keySetInvalid("%s: block %d begins %q but ends %q", source, block, label, endLabel)
		}
		if label != "PUBLIC KEY" {
			return nil, keySetInvalid("%s: block %d is %q, not an Ed25519 \"PUBLIC KEY\"", source, block, label)
		}
		key, err := PublicKeyFromPEM(whole)
		if err != nil {
			return nil, keySetInvalid("%s: block %d is not a well-formed Ed25519 public key (%s)", source, block, err.Error())
		}
		keys = append(keys, VerificationKey{KeyID: KeyIDOf(key), PublicKey: key})
	}
	if strings.Contains(pemBlock.ReplaceAllString(text, ""), "-----BEGIN") {
		return nil, keySetInvalid("%s: block %d is not closed (is the file cut short?)", source, block+1)
	}
	if block == 0 {
		return nil, keySetInvalid("%s: no PEM \"PUBLIC KEY\" block", source)
	}
	return keys, nil
}

// ParseKeySet reads a key set: PEM text of one or more "PUBLIC KEY" blocks (as
// `license-server signing-key show --all` prints it; text between the blocks is
// ignored), or 32 raw key bytes. It is ParseKeySetFrom("public key", input).
func ParseKeySet(input []byte) (KeySet, error) { return ParseKeySetFrom("public key", input) }

// ParseKeySetFrom reads a key set from several parts, each either 32 raw Ed25519 key
// bytes or PEM text with one or more blocks, in the order given. source names the input
// in error messages ("offline.publicKey: block 2 is a private key ..."); with several
// parts each is named "<source> <n>". It refuses a block that is not an Ed25519 public
// key, a private key, a text without a complete block, no parts at all, and the same key
// twice. Errors are *Error with Code PUBLIC_KEY_INVALID.
//
// A part is raw key bytes when it is 32 bytes long and holds no "-----BEGIN"; anything
// else is read as PEM text.
func ParseKeySetFrom(source string, parts ...[]byte) (KeySet, error) {
	if len(parts) == 0 {
		return nil, keySetInvalid("%s: no keys given", source)
	}
	var keys KeySet
	for i, part := range parts {
		where := source
		if len(parts) > 1 {
			where = fmt.Sprintf("%s %d", source, i+1)
		}
		switch {
		case bytes.Contains(part, []byte("-----BEGIN")):
			found, err := keysOfPEM(string(part), where)
			if err != nil {
				return nil, err
			}
			keys = append(keys, found...)
		case len(part) == ed25519.PublicKeySize:
			key := ed25519.PublicKey(append([]byte(nil), part...))
			keys = append(keys, VerificationKey{KeyID: KeyIDOf(key), PublicKey: key})
		case len(part) == 0 || isText(part):
			// Text without a block: the PEM reader says what is missing.
			if _, err := keysOfPEM(string(part), where); err != nil {
				return nil, err
			}
		default:
			return nil, keySetInvalid("%s: expected 32 raw Ed25519 bytes or a PEM \"PUBLIC KEY\"", where)
		}
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.KeyID] {
			return nil, keySetInvalid("%s: key %s appears twice", source, k.KeyID)
		}
		seen[k.KeyID] = true
	}
	return keys, nil
}

// isText is true for printable ASCII text with line breaks: what a PEM file looks like.
func isText(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f') || c > 0x7e {
			return false
		}
	}
	return true
}

// keysFor returns the keys to try for an item that names keyID (or none). A key id
// names exactly one key, which must be in the set; anything else (no key id, or a UUID
// in tokens from before key ids) is tried against every key.
func keysFor(set KeySet, keyID string) (KeySet, string) {
	if !IsKeyID(keyID) {
		return set, ""
	}
	for _, k := range set {
		if k.KeyID == keyID {
			return KeySet{k}, ""
		}
	}
	return nil, keyID
}

// describeUnknownKey is the tail of "signature verification failed: ...".
func describeUnknownKey(keyID string, set KeySet) string {
	noun := "keys"
	if len(set) == 1 {
		noun = "key"
	}
	return fmt.Sprintf("it is signed by key %s, which is not in the key set given (%s %s)", keyID, noun, strings.Join(set.KeyIDs(), ", "))
}

// verifyAny is true when one key of keys verifies the signature (strict RFC 8032, as
// crypto/ed25519 is).
func verifyAny(keys KeySet, message, signature []byte) bool {
	if len(signature) != ed25519.SignatureSize {
		return false
	}
	for _, k := range keys {
		if len(k.PublicKey) == ed25519.PublicKeySize && ed25519.Verify(k.PublicKey, message, signature) {
			return true
		}
	}
	return false
}
