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
// canonical base64url parts, a header without a repeated member with alg EdDSA, typ JWT, no
// crit and a string kid if any, the signature with the key its kid names (or each key for
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
		if !isCanonicalBase64url(part) {
			return nil, invalid("not a compact JWS")
		}
	}
	header, reason := parseTokenPart(parts[0], "header", "is", "has")
	if reason != "" {
		return nil, invalid(reason)
	}
	if alg, _ := header.Values["alg"].(string); alg != "EdDSA" {
		return nil, invalid("the algorithm is not EdDSA")
	}
	if typ, _ := header.Values["typ"].(string); typ != "JWT" {
		return nil, invalid(`the header's "typ" is not "JWT"`)
	}
	// RFC 7515 section 4.1.11: an extension the verifier does not know must not be
	// ignored, and it knows none.
	if header.Has("crit") {
		return nil, invalid(`the header has "crit": no extension is understood`)
	}
	kid, kidIsString := header.Values["kid"].(string)
	if header.Has("kid") && !kidIsString {
		return nil, invalid(`the header's "kid" is not a string`)
	}
	signature, _ := base64.RawURLEncoding.DecodeString(parts[2])
	if len(signature) != 64 {
		return nil, invalid("the signature is not 64 bytes")
	}
	candidates, unknown := keysFor(keys, kid)
	if unknown != "" {
		return nil, invalid("signature verification failed: " + describeUnknownKey(unknown, keys))
	}
	if !verifyAny(candidates, []byte(parts[0]+"."+parts[1]), signature) {
		return nil, invalid("signature verification failed")
	}
	claims, reason := parseTokenPart(parts[1], "claims", "are", "have")
	if reason != "" {
		return nil, invalid(reason)
	}
	claim := func(name, kind string, holds func(any) bool) string {
		value, present := claims.Values[name]
		if !present {
			return `"` + name + `" is missing`
		}
		if !holds(value) {
			return `"` + name + `" is not ` + kind
		}
		return ""
	}
	isInt := func(v any) bool { f, ok := v.(float64); return ok && isSafeInteger(f) }
	isString := func(v any) bool { _, ok := v.(string); return ok }
	isArray := func(v any) bool { _, ok := v.([]any); return ok }
	ints := map[string]int64{}
	for _, name := range []string{"iat", "nbf", "exp"} {
		if reason := claim(name, "an integer", isInt); reason != "" {
			return nil, invalid(reason)
		}
		ints[name] = int64(claims.Values[name].(float64))
	}
	for _, name := range []string{"iss", "sub", "jti", "license_id", "license_key_prefix", "license_type", "hardware_id", "license_valid_until"} {
		if reason := claim(name, "a string", isString); reason != "" {
			return nil, invalid(reason)
		}
	}
	if reason := claim("entitlements", "an array", isArray); reason != "" {
		return nil, invalid(reason)
	}
	list := claims.Values["entitlements"].([]any)
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

// isCanonicalBase64url is true for RFC 4648 section 5 text without padding that is the
// canonical encoding of its bytes: not 1 more than a multiple of 4 characters long, and the
// unused low bits of the last character zero, so one token has one spelling.
func isCanonicalBase64url(part string) bool {
	if !base64urlPart.MatchString(part) {
		return false
	}
	data, err := base64.RawURLEncoding.Strict().DecodeString(part)
	return err == nil && base64.RawURLEncoding.EncodeToString(data) == part
}

// parseTokenPart decodes a canonical base64url part to a JSON object, refusing text that
// is not UTF-8 and an object (at any depth) with a member twice: parsers disagree on which
// copy counts, so {"alg":"none","alg":"EdDSA"} would read differently in two verifiers. The
// reason is "" for a good part; is and has are the verbs that agree with what.
func parseTokenPart(part, what, is, has string) (*Object, string) {
	data, _ := base64.RawURLEncoding.DecodeString(part)
	if !utf8.Valid(data) {
		return nil, "the " + what + " " + is + " not JSON"
	}
	value, repeated, hasRepeated, err := ParseJSON(data)
	if err != nil {
		return nil, "the " + what + " " + is + " not JSON"
	}
	object, ok := value.(*Object)
	if !ok {
		return nil, "the " + what + " " + is + " not a JSON object"
	}
	if hasRepeated {
		return nil, "the " + what + " " + has + ` the member "` + repeated + `" twice`
	}
	return object, ""
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
