package offline

import (
	"bytes"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// LicenseFileVersion is format version 1; LicenseFileVersion2 adds the members of
// V2Members (at least one of them present; machine_key in machinekey.go). This package
// reads both.
const (
	LicenseFileVersion  = 1
	LicenseFileVersion2 = 2
)

// V2Members are the members version 2 adds to version 1 (docs/offline-license-format.md
// section 13); a version 2 file carries at least one of them.
var V2Members = []string{"request_nonce", "machine_key"}

// Entitlement is a licensed feature: in a .lic file, a grace token and an online answer.
type Entitlement struct {
	Code string `json:"code"`
	Name string `json:"name"`
	// UsageLimit is the limit the server granted; nil means none.
	UsageLimit *int64 `json:"usage_limit"`
}

// Payload is the signed content of a .lic file (every member but "signature").
type Payload struct {
	Version          int
	LicenseID        string
	LicenseKeyPrefix string
	CustomerName     string
	// LicenseType is time_based, usage_based or hybrid.
	LicenseType string
	ValidFrom   time.Time
	ValidUntil  time.Time
	// HardwareID is the machine the file is bound to; "" when it is not bound.
	HardwareID   string
	Entitlements []Entitlement
	// EncryptedKey is the sealed decryption key (Base64 of 60 bytes); "" when absent.
	EncryptedKey string
	IssuedAt     time.Time
	Issuer       string
	// KeyID names the signing key; "" when the file carries none.
	KeyID string
	// RequestNonce is the nonce of the activation request the file answers (version 2);
	// "" when the file was not made from a request.
	RequestNonce string
	// MachineKey (version 2) is the machine's X25519 public key, unpadded base64url;
	// EncryptedKey is then sealed to it (80 bytes). "" when absent.
	MachineKey string
}

// DecodedLicenseFile is a .lic file decoded and checked for form, not yet for its
// signature.
type DecodedLicenseFile struct {
	Payload Payload
	// Document is the parsed JSON object, signature included.
	Document  *Object
	Signature []byte
	// SignedBytes is UTF-8(JCS(the document without "signature")): what the signature covers.
	SignedBytes []byte
	// rawHardwareID is hardware_id as parsed (it may hold a lone surrogate, see text.go).
	rawHardwareID string
}

var (
	rfc3339UTCSeconds = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`)
	lowercaseUUID     = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	licenseFields     = []string{
		"version", "license_id", "license_key_prefix", "customer_name", "license_type", "valid_from", "valid_until",
		"hardware_id", "entitlements", "encrypted_key", "issued_at", "issuer", "key_id", "signature",
	}
	optionalFields = map[string]bool{"encrypted_key": true, "key_id": true}
	requestNonce   = regexp.MustCompile(`^[A-Za-z0-9_-]{21}[AQgw]$`)
)

func malformed(format string, args ...any) *Error {
	e := newError(CodeLicenseFileMalformed, format, args...)
	e.Message = "license file is malformed: " + e.Message
	return e
}

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER.
const maxSafeInteger = 1<<53 - 1

func isInteger(f float64) bool     { return !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f) }
func isSafeInteger(f float64) bool { return isInteger(f) && math.Abs(f) <= maxSafeInteger }

// DecodeLicenseFile decodes a .lic file strictly, without checking its signature
// (VerifyLicenseFile does): ASCII whitespace is removed, the rest must be canonical
// Base64 of UTF-8 JSON, an object without repeated members, with the members and forms of
// section 3. The signed bytes are made as section 5 says: the parsed document without
// "signature", canonicalised (RFC 8785), so a file laid out differently (whitespace,
// member order, escapes) by another conforming writer verifies.
func DecodeLicenseFile(file []byte) (*DecodedLicenseFile, error) {
	for _, c := range file {
		if c > 0x7e {
			return nil, malformed("it holds bytes that are not ASCII")
		}
	}
	text := strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\f', '\r', ' ':
			return -1
		}
		return r
	}, string(file))
	if text == "" {
		return nil, malformed("it is empty")
	}
	decoded, ok := DecodeBase64Strict(text)
	if !ok {
		return nil, malformed("it is not valid Base64 (it may be truncated)")
	}
	if !utf8.Valid(decoded) {
		return nil, malformed("the decoded content is not UTF-8")
	}
	// TextDecoder drops a leading byte order mark before JSON.parse sees the text.
	decoded = bytes.TrimPrefix(decoded, []byte("\xEF\xBB\xBF"))
	parsed, repeated, hasRepeated, err := ParseJSON(decoded)
	if err != nil {
		return nil, malformed("the decoded content is not JSON (it may be truncated)")
	}
	object, isObject := parsed.(*Object)
	if !isObject {
		return nil, malformed("the content is not a JSON object")
	}
	if hasRepeated {
		return nil, malformed("the member %s appears twice in one object", Quote(repeated))
	}

	version, _ := object.Values["version"].(float64)
	if _, isNumber := object.Values["version"].(float64); !isNumber || (version != LicenseFileVersion && version != LicenseFileVersion2) {
		if isNumber && isInteger(version) {
			return nil, newError(CodeLicenseFileUnsupportedVersion, "license file has format version %s; this license-server reads versions %d and %d", FormatNumber(version), LicenseFileVersion, LicenseFileVersion2)
		}
		return nil, malformed(`the field "version" is missing or not an integer`)
	}
	for _, field := range licenseFields {
		if !optionalFields[field] && !object.Has(field) {
			return nil, malformed(`the field "%s" is missing`, field)
		}
	}
	known := map[string]bool{}
	for _, field := range licenseFields {
		known[field] = true
	}
	if version == LicenseFileVersion2 {
		for _, field := range V2Members {
			known[field] = true
		}
	}
	for _, name := range object.Names {
		if !known[name] {
			return nil, malformed(`the field "%s" is not part of format version %s`, name, FormatNumber(version))
		}
	}
	if version == LicenseFileVersion2 {
		carries := false
		quoted := make([]string, len(V2Members))
		for i, field := range V2Members {
			carries = carries || object.Has(field)
			quoted[i] = `"` + field + `"`
		}
		if !carries {
			return nil, malformed("a version 2 file must carry %s; without, it is written as version 1", strings.Join(quoted, " or "))
		}
	}

	payload, rawHardwareID, err := checkPayload(object)
	if err != nil {
		return nil, err
	}
	var signature []byte
	if s, isString := object.Values["signature"].(string); isString {
		signature, _ = DecodeBase64Strict(s)
	}
	if len(signature) != 64 {
		return nil, malformed(`"signature" must be the Base64 of 64 bytes`)
	}
	signed, err := Canonicalize(object.Without("signature"))
	if err != nil {
		return nil, malformed("%s", err.Error())
	}
	return &DecodedLicenseFile{Payload: *payload, Document: object, Signature: signature, SignedBytes: signed, rawHardwareID: rawHardwareID}, nil
}

// checkPayload checks the members' forms in the reference's order.
func checkPayload(object *Object) (*Payload, string, error) {
	text := func(field string, max int) (string, error) {
		v, isString := object.Values[field].(string)
		if !isString || utf16Length(v) > max {
			return "", malformed(`"%s" must be a string of at most %d UTF-16 code units`, field, max)
		}
		return v, nil
	}
	timestamp := func(field string) (time.Time, error) {
		v, err := text(field, 1000)
		if err != nil {
			return time.Time{}, err
		}
		t, ok := parseTimestamp(v)
		if !ok {
			return time.Time{}, malformed(`"%s" must be an RFC 3339 UTC timestamp with second precision, such as 2026-11-22T10:00:00Z`, field)
		}
		return t, nil
	}

	licenseID, err := text("license_id", 1000)
	if err != nil {
		return nil, "", err
	}
	if !lowercaseUUID.MatchString(licenseID) {
		return nil, "", malformed(`"license_id" must be a lowercase UUID`)
	}
	prefix, err := text("license_key_prefix", 1000)
	if err != nil {
		return nil, "", err
	}
	if utf16Length(prefix) != 8 {
		return nil, "", malformed(`"license_key_prefix" must be 8 UTF-16 code units`)
	}
	licenseType, err := text("license_type", 1000)
	if err != nil {
		return nil, "", err
	}
	if licenseType != "time_based" && licenseType != "usage_based" && licenseType != "hybrid" {
		return nil, "", malformed(`"license_type" must be time_based, usage_based or hybrid`)
	}
	hardwareID, err := text("hardware_id", MaxHardwareIDLength)
	if err != nil {
		return nil, "", err
	}
	list, isArray := object.Values["entitlements"].([]any)
	if !isArray {
		return nil, "", malformed(`"entitlements" must be an array`)
	}
	entitlements := make([]Entitlement, 0, len(list))
	previous, hasPrevious := "", false
	for _, item := range list {
		entry, isObject := item.(*Object)
		if !isObject {
			return nil, "", malformed("each entitlement must be an object")
		}
		if len(entry.Names) != 3 || !entry.Has("code") || !entry.Has("name") || !entry.Has("usage_limit") {
			return nil, "", malformed(`each entitlement must have exactly "code", "name" and "usage_limit"`)
		}
		code, codeIsString := entry.Values["code"].(string)
		name, nameIsString := entry.Values["name"].(string)
		if !codeIsString || !nameIsString {
			return nil, "", malformed(`entitlement "code" and "name" must be strings`)
		}
		var limit *int64
		switch v := entry.Values["usage_limit"].(type) {
		case nil:
		case float64:
			if !isSafeInteger(v) || v < 0 {
				return nil, "", malformed(`entitlement "usage_limit" must be a non-negative integer or null`)
			}
			n := int64(v)
			limit = &n
		default:
			return nil, "", malformed(`entitlement "usage_limit" must be a non-negative integer or null`)
		}
		if hasPrevious && compareUTF16(previous, code) >= 0 {
			return nil, "", malformed(`"entitlements" must be sorted by code, without repeats`)
		}
		previous, hasPrevious = code, true
		entitlements = append(entitlements, Entitlement{Code: toUTF8(code), Name: toUTF8(name), UsageLimit: limit})
	}
	keyID := ""
	if v, present := object.Get("key_id"); present {
		s, isString := v.(string)
		if !isString || !IsKeyID(s) {
			return nil, "", malformed(`"key_id" must be 16 lowercase hex digits`)
		}
		keyID = s
	}
	machineKey, err := checkMachineKeyMember(object, hardwareID)
	if err != nil {
		return nil, "", err
	}
	encryptedKey := ""
	if v, present := object.Get("encrypted_key"); present {
		s, isString := v.(string)
		sealed, ok := DecodeBase64Strict(s)
		// The HPKE form of a machine-key file is longer than the hardware-ID form.
		length := SealedKeyLength
		if machineKey != "" {
			length = MachineSealedKeyLength
		}
		if !isString || !ok || len(sealed) != length {
			return nil, "", malformed(`"encrypted_key" must be the Base64 of %d bytes`, length)
		}
		if hardwareID == "" {
			return nil, "", malformed(`"encrypted_key" requires a "hardware_id"`)
		}
		encryptedKey = s
	}
	nonce := ""
	if v, present := object.Get("request_nonce"); present {
		s, isString := v.(string)
		if !isString || !requestNonce.MatchString(s) {
			return nil, "", malformed(`"request_nonce" must be the unpadded base64url of 16 bytes (22 characters)`)
		}
		nonce = s
	}
	customerName, err := text("customer_name", 1000)
	if err != nil {
		return nil, "", err
	}
	validFrom, err := timestamp("valid_from")
	if err != nil {
		return nil, "", err
	}
	validUntil, err := timestamp("valid_until")
	if err != nil {
		return nil, "", err
	}
	issuedAt, err := timestamp("issued_at")
	if err != nil {
		return nil, "", err
	}
	issuer, err := text("issuer", 1000)
	if err != nil {
		return nil, "", err
	}
	if !validUntil.After(validFrom) {
		return nil, "", malformed(`"valid_until" must be after "valid_from"`)
	}
	version := LicenseFileVersion
	if v, _ := object.Values["version"].(float64); v == LicenseFileVersion2 {
		version = LicenseFileVersion2
	}
	return &Payload{
		Version:          version,
		LicenseID:        licenseID,
		LicenseKeyPrefix: toUTF8(prefix),
		CustomerName:     toUTF8(customerName),
		LicenseType:      licenseType,
		ValidFrom:        validFrom,
		ValidUntil:       validUntil,
		HardwareID:       toUTF8(hardwareID),
		Entitlements:     entitlements,
		EncryptedKey:     encryptedKey,
		IssuedAt:         issuedAt,
		Issuer:           toUTF8(issuer),
		KeyID:            keyID,
		RequestNonce:     nonce,
		MachineKey:       machineKey,
	}, hardwareID, nil
}

// parseTimestamp reads YYYY-MM-DDTHH:MM:SSZ, a real calendar date and time of day.
func parseTimestamp(s string) (time.Time, bool) {
	if !rfc3339UTCSeconds.MatchString(s) {
		return time.Time{}, false
	}
	num := func(from, to int) int {
		n := 0
		for _, c := range s[from:to] {
			n = n*10 + int(c-'0')
		}
		return n
	}
	t := time.Date(num(0, 4), time.Month(num(5, 7)), num(8, 10), num(11, 13), num(14, 16), num(17, 19), 0, time.UTC)
	// time.Date normalises 2026-02-30 to March 2 and 24:00 to the next day: refuse both.
	if t.Format("2006-01-02T15:04:05") != s[:19] {
		return time.Time{}, false
	}
	return t, true
}
