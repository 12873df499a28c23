package offline

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Activation request files (docs/offline-license-format.md section 12): what an
// air-gapped machine writes for the operator who checks its license out.
//
//	-----BEGIN LICENSE ACTIVATION REQUEST-----
//	Base64(UTF-8(JCS(request))), wrapped at 64 columns
//	-----END LICENSE ACTIVATION REQUEST-----
const (
	ActivationRequestFormat  = "license-server-activation-request"
	ActivationRequestVersion = 1
	ActivationRequestBegin   = "-----BEGIN LICENSE ACTIVATION REQUEST-----"
	ActivationRequestEnd     = "-----END LICENSE ACTIVATION REQUEST-----"
	// LicenseKeyDigestContext separates the digest from any other SHA-256 of the key.
	LicenseKeyDigestContext = "license-server/v1/activation-request\n"
	RequestNonceBytes       = 16
	MachineKeyBytes         = 32
	MaxMachineNameLength    = 255
	MaxAppVersionLength     = 100
	// CodeActivationRequestMalformed is the one refusal of DecodeActivationRequest.
	CodeActivationRequestMalformed = "ACTIVATION_REQUEST_MALFORMED"
)

// ActivationRequest is a request's members; PreviousHardwareID is "" when absent.
type ActivationRequest struct {
	LicenseKeyPrefix   string
	LicenseKeyDigest   string
	HardwareID         string
	PreviousHardwareID string
	MachineName        string
	AppVersion         string
	MachineKey         string
	Nonce              string
	CreatedAt          string
}

var requestMembers = []string{
	"format", "version", "license_key_prefix", "license_key_digest", "hardware_id", "previous_hardware_id",
	"machine_name", "app_version", "machine_key", "nonce", "created_at",
}

var (
	standardBase64Text = regexp.MustCompile(`^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`)
	base64URLText      = regexp.MustCompile(`^[A-Za-z0-9_-]*$`)
	controlCharacter   = regexp.MustCompile(`[\x{0}-\x{1F}\x{7F}-\x{9F}]`)
)

// LicenseKeyDigest is license_key_digest: unpadded base64url of SHA-256 of the context and
// the license key in its canonical form (the caller canonicalises: upper case, Crockford's
// look-alikes read as digits, groups of four; as the server stores it).
func LicenseKeyDigest(canonicalLicenseKey string) string {
	sum := sha256.Sum256([]byte(LicenseKeyDigestContext + canonicalLicenseKey))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// DecodeBase64URLStrict decodes unpadded base64url (RFC 4648 section 5) of exactly length
// bytes in its canonical form; ok is false for anything else.
func DecodeBase64URLStrict(text string, length int) (data []byte, ok bool) {
	if !base64URLText.MatchString(text) || len(text) != (length*4+2)/3 {
		return nil, false
	}
	data, err := base64.RawURLEncoding.Strict().DecodeString(text)
	if err != nil || len(data) != length || base64.RawURLEncoding.EncodeToString(data) != text {
		return nil, false
	}
	return data, true
}

func requestMalformed(format string, args ...any) *Error {
	return &Error{Code: CodeActivationRequestMalformed, Message: "activation request is malformed: " + fmt.Sprintf(format, args...)}
}

// object is the request as a JSON object (see json.go), for Canonicalize.
func (r *ActivationRequest) object() *Object {
	o := &Object{Values: map[string]any{}}
	set := func(name string, value any) {
		o.Names = append(o.Names, name)
		o.Values[name] = value
	}
	set("format", ActivationRequestFormat)
	set("version", float64(ActivationRequestVersion))
	set("license_key_prefix", r.LicenseKeyPrefix)
	set("license_key_digest", r.LicenseKeyDigest)
	set("hardware_id", r.HardwareID)
	if r.PreviousHardwareID != "" {
		set("previous_hardware_id", r.PreviousHardwareID)
	}
	set("machine_name", r.MachineName)
	set("app_version", r.AppVersion)
	set("machine_key", r.MachineKey)
	set("nonce", r.Nonce)
	set("created_at", r.CreatedAt)
	return o
}

// EncodeActivationRequest is the request's text: the armour lines around the standard
// Base64 of its RFC 8785 form, 64 columns a line, LF line ends. It refuses (as a reader
// would) a request that breaks the format.
func EncodeActivationRequest(r *ActivationRequest) (string, error) {
	o := r.object()
	if _, err := checkRequest(o); err != nil {
		return "", err
	}
	canonical, err := Canonicalize(o)
	if err != nil {
		return "", err
	}
	encoded := base64.StdEncoding.EncodeToString(canonical)
	var b strings.Builder
	b.WriteString(ActivationRequestBegin + "\n")
	for len(encoded) > 64 {
		b.WriteString(encoded[:64] + "\n")
		encoded = encoded[64:]
	}
	b.WriteString(encoded + "\n" + ActivationRequestEnd + "\n")
	return b.String(), nil
}

func isASCIISpace(c byte) bool { return c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == ' ' }

// DecodeActivationRequest reads a request strictly, as the server does: ASCII whitespace
// is free around and inside the armour; everything else must be exactly what a writer
// makes. A reader without a Unicode normaliser (this one) does not check that the
// hardware IDs are in NFC; the server does.
func DecodeActivationRequest(input []byte) (*ActivationRequest, error) {
	body := bytes.Map(func(r rune) rune {
		if r < utf8.RuneSelf && isASCIISpace(byte(r)) {
			return -1
		}
		return r
	}, input)
	if len(body) == 0 {
		return nil, requestMalformed("it is empty")
	}
	for _, c := range input {
		if !isASCIISpace(c) && (c < 0x20 || c > 0x7e) {
			return nil, requestMalformed("it holds characters that are not printable ASCII")
		}
	}
	text := strings.TrimFunc(string(input), func(r rune) bool { return r < utf8.RuneSelf && isASCIISpace(byte(r)) })
	if !strings.HasPrefix(text, ActivationRequestBegin) {
		return nil, requestMalformed("it does not start with the line %s", ActivationRequestBegin)
	}
	if !strings.HasSuffix(text, ActivationRequestEnd) || len(text) < len(ActivationRequestBegin)+len(ActivationRequestEnd) {
		return nil, requestMalformed("it does not end with the line %s (it may be truncated)", ActivationRequestEnd)
	}
	inner := strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf && isASCIISpace(byte(r)) {
			return -1
		}
		return r
	}, text[len(ActivationRequestBegin):len(text)-len(ActivationRequestEnd)])
	if inner == "" {
		return nil, requestMalformed("it holds nothing between its BEGIN and END lines")
	}
	if !standardBase64Text.MatchString(inner) {
		return nil, requestMalformed("the text between its BEGIN and END lines is not standard Base64")
	}
	decoded, ok := DecodeBase64Strict(inner)
	if !ok {
		return nil, requestMalformed("the Base64 is not the canonical encoding of its bytes")
	}
	if !utf8.Valid(decoded) {
		return nil, requestMalformed("the decoded content is not UTF-8")
	}
	if bytes.HasPrefix(decoded, []byte("\xEF\xBB\xBF")) {
		// JSON.parse of the reference refuses a byte order mark: so does this reader.
		return nil, requestMalformed("the decoded content is not JSON")
	}
	parsed, _, _, err := ParseJSON(decoded)
	if err != nil {
		return nil, requestMalformed("the decoded content is not JSON")
	}
	object, isObject := parsed.(*Object)
	if !isObject {
		return nil, requestMalformed("the content is not a JSON object")
	}
	request, err := checkRequest(object)
	if err != nil {
		return nil, err
	}
	canonical, err := Canonicalize(object)
	if err != nil || !bytes.Equal(canonical, decoded) {
		return nil, requestMalformed("its JSON is not in RFC 8785 canonical form (members sorted, no spaces, each member once)")
	}
	return request, nil
}

// checkRequest checks the members in the reference's order (activation-request.ts).
func checkRequest(o *Object) (*ActivationRequest, error) {
	known := map[string]bool{}
	for _, name := range requestMembers {
		known[name] = true
	}
	for _, name := range o.Names {
		if !known[name] {
			return nil, requestMalformed(`the member "%s" is not part of an activation request`, toUTF8(name))
		}
	}
	for _, name := range requestMembers {
		if name != "previous_hardware_id" && !o.Has(name) {
			return nil, requestMalformed(`the member "%s" is missing`, name)
		}
	}
	if s, _ := o.Values["format"].(string); s != ActivationRequestFormat {
		return nil, requestMalformed(`"format" must be "%s"`, ActivationRequestFormat)
	}
	if v, isNumber := o.Values["version"].(float64); !isNumber || v != ActivationRequestVersion {
		if isNumber && isInteger(v) {
			return nil, requestMalformed("it has version %s; this license-server reads version %d", FormatNumber(v), ActivationRequestVersion)
		}
		return nil, requestMalformed(`"version" must be the integer 1`)
	}
	prefix, isString := o.Values["license_key_prefix"].(string)
	if !isString || utf16Length(prefix) != 8 {
		return nil, requestMalformed(`"license_key_prefix" must be 8 UTF-16 code units`)
	}
	createdAt, _ := o.Values["created_at"].(string)
	if _, ok := parseTimestamp(createdAt); !ok {
		return nil, requestMalformed(`"created_at" must be an RFC 3339 UTC timestamp with second precision, such as 2026-11-22T10:00:00Z`)
	}
	bytesOf := func(name string, length int) (string, error) {
		s, isString := o.Values[name].(string)
		if _, ok := DecodeBase64URLStrict(s, length); !isString || !ok {
			return "", requestMalformed(`"%s" must be the unpadded base64url of %d bytes (%d characters)`, name, length, (length*4+2)/3)
		}
		return s, nil
	}
	text := func(name string, max int) (string, error) {
		s, isString := o.Values[name].(string)
		if !isString || utf16Length(s) > max || controlCharacter.MatchString(s) || hasLoneSurrogate(s) {
			return "", requestMalformed(`"%s" must be a string of at most %d UTF-16 code units without control characters`, name, max)
		}
		return s, nil
	}
	hardwareID := func(name string) (string, error) {
		value := o.Values[name]
		s, isString := value.(string)
		switch {
		case !isString:
			kind := "object"
			switch value.(type) {
			case nil:
				kind = "null"
			case bool:
				kind = "boolean"
			case float64:
				kind = "number"
			}
			return "", requestMalformed(`"%s": must be a string, got %s`, name, kind)
		case s == "":
			return "", requestMalformed(`"%s": must not be empty`, name)
		case controlCharacter.MatchString(s):
			return "", requestMalformed(`"%s": must not contain control characters`, name)
		case hasLoneSurrogate(s):
			return "", requestMalformed(`"%s": must be well-formed Unicode text`, name)
		case len(s) > MaxHardwareIDLength:
			return "", requestMalformed(`"%s": must be at most %d bytes of UTF-8, got %d`, name, MaxHardwareIDLength, len(s))
		}
		return s, nil
	}
	r := &ActivationRequest{LicenseKeyPrefix: prefix, CreatedAt: createdAt}
	var err error
	if r.LicenseKeyDigest, err = bytesOf("license_key_digest", 32); err != nil {
		return nil, err
	}
	if r.HardwareID, err = hardwareID("hardware_id"); err != nil {
		return nil, err
	}
	if o.Has("previous_hardware_id") {
		if r.PreviousHardwareID, err = hardwareID("previous_hardware_id"); err != nil {
			return nil, err
		}
	}
	if r.MachineName, err = text("machine_name", MaxMachineNameLength); err != nil {
		return nil, err
	}
	if r.AppVersion, err = text("app_version", MaxAppVersionLength); err != nil {
		return nil, err
	}
	if r.MachineKey, err = bytesOf("machine_key", MachineKeyBytes); err != nil {
		return nil, err
	}
	// A point of small order is no machine's key: the server would seal nothing to it.
	if key, _ := DecodeBase64URLStrict(r.MachineKey, MachineKeyBytes); IsSmallOrderPoint(key) {
		return nil, requestMalformed(`"machine_key" is an X25519 point of small order (section 12 lists them), not the public key of a key pair`)
	}
	if r.Nonce, err = bytesOf("nonce", RequestNonceBytes); err != nil {
		return nil, err
	}
	if o.Has("previous_hardware_id") && r.PreviousHardwareID == r.HardwareID {
		return nil, requestMalformed(`"previous_hardware_id" must not equal "hardware_id"`)
	}
	return r, nil
}
