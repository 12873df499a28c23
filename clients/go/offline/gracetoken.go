package offline

import (
	"encoding/base64"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// NotBeforeLeeway is how far a verifier's clock may lag the issuer's for a grace token's
// nbf; exp gets no leeway.
const NotBeforeLeeway = 300 * time.Second

// maxTokenLength is the longest token accepted, in characters.
const maxTokenLength = 16384

// GraceTokenHeader is the JOSE header of a grace token.
type GraceTokenHeader struct {
	Alg string
	Typ string
	// Kid is the signing key's id; tokens from before key ids carry a UUID here.
	Kid string
}

// GraceTokenClaims are the claims of a grace token (docs/grace-token.md).
type GraceTokenClaims struct {
	Iss string
	// Sub is the license id.
	Sub              string
	Iat, Nbf, Exp    int64
	Jti              string
	LicenseID        string
	LicenseKeyPrefix string
	LicenseType      string
	HardwareID       string
	// LicenseValidUntil is the license's own end (RFC 3339); Exp never passes it.
	LicenseValidUntil string
	Entitlements      []Entitlement
	// Raw is the claims object as parsed.
	Raw *Object
}

// ExpiresAt is Exp as a time.
func (c *GraceTokenClaims) ExpiresAt() time.Time { return time.Unix(c.Exp, 0).UTC() }

// VerifiedGraceToken is a token that passed verification.
type VerifiedGraceToken struct {
	Header GraceTokenHeader
	Claims GraceTokenClaims
}

// GraceTokenOptions are the inputs of VerifyGraceToken besides the token and the keys.
type GraceTokenOptions struct {
	// Now is the time to check nbf and exp against; zero means time.Now().
	Now time.Time
	// HardwareID, when not "", must equal the token's hardware_id exactly: the reference
	// compares NFC forms, and the standard library has no normaliser, so it must be NFC
	// (the server writes every hardware_id in NFC).
	HardwareID string
}

var base64urlPart = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// VerifyGraceToken checks a grace token as docs/grace-token.md "Verifying" says: three
// base64url parts, alg EdDSA, the signature with the key its kid names (or each key for
// another kid), every claim of the table present with its type, nbf with NotBeforeLeeway,
// exp without leeway, and the hardware ID. Failures are *Error: GRACE_TOKEN_INVALID ("grace token is invalid: ...")
// for anything malformed, tampered with or not valid yet, GRACE_TOKEN_EXPIRED past exp,
// HARDWARE_MISMATCH for another machine.
func VerifyGraceToken(token string, keys KeySet, opts GraceTokenOptions) (*VerifiedGraceToken, error) {
	invalid := func(reason string) *Error {
		return newError(CodeGraceTokenInvalid, "grace token is invalid: %s", reason)
	}
	if utf16Length(token) > maxTokenLength {
		return nil, invalid("not a token")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, invalid("not a compact JWS")
	}
	for _, part := range parts {
		if !base64urlPart.MatchString(part) {
			return nil, invalid("not a compact JWS")
		}
	}
	header, ok := parseTokenPart(parts[0])
	if !ok {
		return nil, invalid("the header is not JSON")
	}
	if alg, _ := header.Values["alg"].(string); alg != "EdDSA" {
		return nil, invalid("the algorithm is not EdDSA")
	}
	signature, err := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err != nil || base64.RawURLEncoding.EncodeToString(signature) != parts[2] || len(signature) != 64 {
		return nil, invalid("the signature is not 64 bytes")
	}
	kid, _ := header.Values["kid"].(string)
	candidates, unknown := keysFor(keys, kid)
	if unknown != "" {
		return nil, invalid("signature verification failed: " + describeUnknownKey(unknown, keys))
	}
	if !verifyAny(candidates, []byte(parts[0]+"."+parts[1]), signature) {
		return nil, invalid("signature verification failed")
	}
	claims, ok := parseTokenPart(parts[1])
	if !ok {
		return nil, invalid("the claims are not JSON")
	}
	ints := map[string]int64{}
	for _, name := range []string{"iat", "nbf", "exp"} {
		f, isNumber := claims.Values[name].(float64)
		if !isNumber || !isSafeInteger(f) {
			return nil, invalid(`"` + name + `" is missing`)
		}
		ints[name] = int64(f)
	}
	for _, name := range []string{"iss", "sub", "jti", "license_id", "license_key_prefix", "license_type", "hardware_id", "license_valid_until"} {
		if _, isString := claims.Values[name].(string); !isString {
			return nil, invalid(`"` + name + `" is missing`)
		}
	}
	list, isArray := claims.Values["entitlements"].([]any)
	if !isArray {
		return nil, invalid(`"entitlements" is missing`)
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	seconds := now.Unix()
	if seconds+int64(NotBeforeLeeway/time.Second) < ints["nbf"] {
		return nil, invalid("it is not valid yet (check the clock)")
	}
	if seconds >= ints["exp"] {
		return nil, newError(CodeGraceTokenExpired, "grace period expired at %s", time.Unix(ints["exp"], 0).UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	str := func(o *Object, name string) string {
		s, _ := o.Values[name].(string)
		return s
	}
	if opts.HardwareID != "" && str(claims, "hardware_id") != opts.HardwareID {
		return nil, newError(CodeHardwareMismatch, "hardware ID mismatch")
	}
	return &VerifiedGraceToken{
		Header: GraceTokenHeader{Alg: "EdDSA", Typ: str(header, "typ"), Kid: kid},
		Claims: GraceTokenClaims{
			Iss: str(claims, "iss"), Sub: str(claims, "sub"),
			Iat: ints["iat"], Nbf: ints["nbf"], Exp: ints["exp"],
			Jti: str(claims, "jti"), LicenseID: str(claims, "license_id"),
			LicenseKeyPrefix: str(claims, "license_key_prefix"), LicenseType: str(claims, "license_type"),
			HardwareID: str(claims, "hardware_id"), LicenseValidUntil: str(claims, "license_valid_until"),
			Entitlements: EntitlementsOf(list),
			Raw:          claims,
		},
	}, nil
}

// parseTokenPart decodes a base64url part to a JSON object, as leniently as the reference
// (Node's base64url decoder and a replacing UTF-8 decoder; JSON.parse keeps the last of
// repeated members). The signature has been checked before the claims are read.
func parseTokenPart(part string) (*Object, bool) {
	text := part
	if len(text)%4 == 1 {
		text = text[:len(text)-1]
	}
	data, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		return nil, false
	}
	if !utf8.Valid(data) {
		data = []byte(strings.ToValidUTF8(string(data), "\uFFFD"))
	}
	value, _, _, err := ParseJSON(data)
	if err != nil {
		return nil, false
	}
	object, ok := value.(*Object)
	return object, ok
}

// EntitlementsOf reads a JSON array of entitlements leniently: objects with a string code
// and name and a non-negative integer (or null) usage_limit; members of other types are
// left empty, elements that are not objects are skipped.
func EntitlementsOf(list []any) []Entitlement {
	out := make([]Entitlement, 0, len(list))
	for _, item := range list {
		o, ok := item.(*Object)
		if !ok {
			continue
		}
		var e Entitlement
		e.Code, _ = o.Values["code"].(string)
		e.Name, _ = o.Values["name"].(string)
		e.Code, e.Name = toUTF8(e.Code), toUTF8(e.Name)
		if f, ok := o.Values["usage_limit"].(float64); ok && isSafeInteger(f) {
			n := int64(f)
			e.UsageLimit = &n
		}
		out = append(out, e)
	}
	return out
}
