package offline

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

type verifyFixture struct {
	v            *licVectors
	secret       ed25519.PrivateKey
	keys         KeySet
	unbound      []byte
	bound        []byte
	boundPayload *Object
	payload      *Object
	hardwareID   string
}

func newVerifyFixture(t *testing.T) *verifyFixture {
	v := loadLicVectors(t)
	secret := v.secretKey(t, nil)
	return &verifyFixture{
		v:            v,
		secret:       secret,
		keys:         mustKeySet(t, secret.Public().(ed25519.PublicKey)),
		unbound:      []byte(v.vector(t, "unbound").File),
		bound:        []byte(v.vector(t, "bound-with-key").File),
		boundPayload: parseObject(t, v.vector(t, "bound-with-key").Payload),
		payload:      parseObject(t, v.vector(t, "unbound").Payload),
		hardwareID:   v.vector(t, "bound-with-key").Binding.HardwareID,
	}
}

func (f *verifyFixture) verify(file []byte, hardwareID string, now ...time.Time) (*VerifiedLicenseFile, error) {
	at := inWindow
	if len(now) > 0 {
		at = now[0]
	}
	return VerifyLicenseFile(file, VerifyOptions{Keys: f.keys, HardwareID: hardwareID, Now: at})
}

func TestWhitespaceAnywhere(t *testing.T) {
	f := newVerifyFixture(t)
	text := strings.TrimSpace(string(f.unbound))
	var wrapped strings.Builder
	wrapped.WriteString(" \t")
	for len(text) > 64 {
		wrapped.WriteString(text[:64] + "\r\n")
		text = text[64:]
	}
	wrapped.WriteString(text + "\f\n")
	verified, err := f.verify([]byte(wrapped.String()), "")
	if err != nil || verified.Payload.LicenseID != "c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d" {
		t.Fatal(err)
	}
}

func TestValidityWindowToTheSecond(t *testing.T) {
	f := newVerifyFixture(t)
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339Nano, s); return v }
	_, err := f.verify(f.unbound, "", at("2025-12-31T23:59:59Z"))
	if e := refusedWith(t, err, CodeLicenseNotYetValid); !strings.HasPrefix(e.Message, "license not yet valid") {
		t.Fatal(e.Message)
	}
	for _, ok := range []string{"2026-01-01T00:00:00Z", "2026-12-31T23:59:58Z", "2026-12-31T23:59:58.999Z"} {
		if _, err := f.verify(f.unbound, "", at(ok)); err != nil {
			t.Fatalf("%s: %v", ok, err)
		}
	}
	_, err = f.verify(f.unbound, "", at("2026-12-31T23:59:59Z"))
	if e := refusedWith(t, err, CodeLicenseExpired); e.Message != "license expired at 2026-12-31T23:59:59Z" {
		t.Fatal(e.Message)
	}
}

func TestHardwareBinding(t *testing.T) {
	f := newVerifyFixture(t)
	verified, err := f.verify(f.bound, f.hardwareID)
	if err != nil || len(verified.DecryptionKey) != 32 || !verified.HardwareChecked {
		t.Fatal(err)
	}
	_, err = f.verify(f.bound, "another-machine")
	if e := refusedWith(t, err, CodeHardwareMismatch); e.Message != "hardware ID mismatch: failed to decrypt license key" {
		t.Fatal(e.Message)
	}
	boundNoKey := forge(t, with(f.boundPayload, "encrypted_key", remove), f.secret)
	_, err = f.verify(boundNoKey, "another-machine")
	if e := refusedWith(t, err, CodeHardwareMismatch); e.Message != "hardware ID mismatch" {
		t.Fatal(e.Message)
	}
	verified, err = f.verify(boundNoKey, "")
	if err != nil || verified.HardwareChecked {
		t.Fatal("a binding without a sealed key may be left unchecked, and says so", err)
	}
	verified, err = f.verify(boundNoKey, f.hardwareID)
	if err != nil || !verified.HardwareChecked || verified.DecryptionKey != nil {
		t.Fatal(err)
	}
}

func TestEncryptedKeyNeedsHardwareID(t *testing.T) {
	f := newVerifyFixture(t)
	_, err := f.verify(f.bound, "")
	refusedWith(t, err, CodeHardwareIDRequired, `hardware ID required: the file is bound to "HW-4f2a-9c1e-ü" and carries a decryption key`)
	skipped, err := VerifyLicenseFile(f.bound, VerifyOptions{Keys: f.keys, SkipHardwareCheck: true, Now: inWindow})
	if err != nil || skipped.HardwareChecked || skipped.DecryptionKey != nil {
		t.Fatal(err)
	}
	// Skipping the binding skips nothing else.
	_, err = VerifyLicenseFile(f.bound, VerifyOptions{Keys: f.keys, SkipHardwareCheck: true, Now: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)})
	refusedWith(t, err, CodeLicenseExpired)
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32))
	_, err = VerifyLicenseFile(forge(t, f.boundPayload, other), VerifyOptions{Keys: f.keys, SkipHardwareCheck: true, Now: inWindow})
	refusedWith(t, err, CodeSignatureInvalid)
}

func TestSealedKeyThatDoesNotOpen(t *testing.T) {
	f := newVerifyFixture(t)
	otherSeal := forge(t, with(f.boundPayload, "encrypted_key", EncodeBase64(bytes.Repeat([]byte{1}, 60))), f.secret)
	_, err := f.verify(otherSeal, f.hardwareID)
	if e := refusedWith(t, err, CodeDecryptionFailed); e.Message != "failed to decrypt license key" {
		t.Fatal(e.Message)
	}
}

func TestSignedByAnotherKey(t *testing.T) {
	f := newVerifyFixture(t)
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32))
	_, err := f.verify(forge(t, f.boundPayload, other), f.hardwareID)
	if e := refusedWith(t, err, CodeSignatureInvalid); e.Message != "signature verification failed" {
		t.Fatal(e.Message)
	}
	_, err = VerifyLicenseFile(f.unbound, VerifyOptions{Keys: mustKeySet(t, other.Public().(ed25519.PublicKey)), Now: inWindow})
	refusedWith(t, err, CodeSignatureInvalid)
	_, err = VerifyLicenseFile(f.unbound, VerifyOptions{Now: inWindow})
	refusedWith(t, err, CodeSignatureInvalid)
}

func TestEveryFlippedBitIsRefused(t *testing.T) {
	f := newVerifyFixture(t)
	for _, file := range [][]byte{f.unbound, f.bound} {
		outcomes := map[string]int{}
		for i := range file {
			for bit := 0; bit < 8; bit++ {
				flipped := append([]byte(nil), file...)
				flipped[i] ^= 1 << bit
				_, err := f.verify(flipped, f.hardwareID)
				if err == nil {
					t.Fatalf("byte %d bit %d went unnoticed", i, bit)
				}
				code := CodeOf(err)
				if code == "" {
					t.Fatalf("byte %d bit %d: %v", i, bit, err)
				}
				outcomes[code]++
			}
		}
		if outcomes[CodeSignatureInvalid] == 0 || outcomes[CodeLicenseFileMalformed] == 0 {
			t.Fatalf("outcomes %v", outcomes)
		}
	}
}

func TestTruncatedAtAnyLength(t *testing.T) {
	f := newVerifyFixture(t)
	text := strings.TrimSpace(string(f.bound))
	for length := 0; length < len(text); length++ {
		_, err := f.verify([]byte(text[:length]), f.hardwareID)
		refusedWith(t, err, CodeLicenseFileMalformed)
	}
}

func TestMalformedWithReasons(t *testing.T) {
	f := newVerifyFixture(t)
	cases := []struct {
		file   []byte
		reason string
	}{
		{[]byte(""), "it is empty"},
		{[]byte(" \r\n"), "it is empty"},
		{[]byte("not base64!"), "not valid Base64"},
		{[]byte(strings.TrimSpace(string(f.unbound)) + "="), "not valid Base64"},
		{[]byte("-" + strings.TrimSpace(string(f.unbound))[1:]), "not valid Base64"}, // Base64url
		{[]byte("_" + strings.TrimSpace(string(f.unbound))[1:]), "not valid Base64"},
		{[]byte(strings.TrimRight(strings.TrimSpace(string(f.unbound)), "=")), "not valid Base64"},
		{[]byte("QR=="), "not valid Base64"},     // the low bits of the last symbol set: not canonical
		{[]byte("QQ==QQ=="), "not valid Base64"}, // text after the padding
		{[]byte{0xff, 0xfe}, "not ASCII"},
		{b64("\xc3\x28"), "not UTF-8"},
		{b64("\xed\xa0\x80"), "not UTF-8"}, // an encoded surrogate
		{b64(`{"version":1,`), "not JSON"},
		{b64(`{"version":1}x`), "not JSON"},
		{b64(`{'version':1}`), "not JSON"},
		{b64(`[1,2]`), "not a JSON object"},
		{b64(`"text"`), "not a JSON object"},
	}
	for _, c := range cases {
		_, err := f.verify(c.file, "")
		refusedWith(t, err, CodeLicenseFileMalformed, "license file is malformed: ", c.reason)
	}
}

func TestMissingUnknownAndBadFields(t *testing.T) {
	f := newVerifyFixture(t)
	for _, field := range []string{"license_id", "customer_name", "valid_until", "hardware_id", "entitlements", "issuer"} {
		_, err := f.verify(forge(t, with(f.payload, field, remove), f.secret), "")
		refusedWith(t, err, CodeLicenseFileMalformed, fmt.Sprintf(`"%s" is missing`, field))
	}
	noSignature, _ := Canonicalize(f.payload)
	_, err := f.verify([]byte(base64.StdEncoding.EncodeToString(noSignature)), "")
	refusedWith(t, err, CodeLicenseFileMalformed, `"signature" is missing`)
	_, err = f.verify(forge(t, with(f.payload, "extra", true), f.secret), "")
	refusedWith(t, err, CodeLicenseFileMalformed, `"extra" is not part of format version 1`)
	_, err = f.verify(forge(t, with(f.payload, "key_id", "D75A980182B10AB7"), f.secret), "")
	refusedWith(t, err, CodeLicenseFileMalformed, `"key_id" must be 16 lowercase hex digits`)

	entitlement := func(code string, limit any) *Object {
		return &Object{Names: []string{"code", "name", "usage_limit"}, Values: map[string]any{"code": code, "name": strings.ToUpper(code), "usage_limit": limit}}
	}
	bad := []struct {
		field  string
		value  any
		reason string
	}{
		{"license_id", "C2A1B9E4-5D7F-4A3B-9E1C-0F2D3B4A5C6D", "lowercase UUID"},
		{"valid_until", "2026-12-31T23:59:59.000Z", "second precision"},
		{"valid_until", "2026-02-30T00:00:00Z", "second precision"},
		{"valid_until", "2026-12-31T24:00:00Z", "second precision"},
		{"valid_until", "2026-12-31T23:60:00Z", "second precision"},
		{"valid_until", "2026-12-31 23:59:59Z", "second precision"},
		{"valid_until", "2026-12-31T23:59:59+00:00", "second precision"},
		{"issued_at", "2026-11-22t10:00:00z", "second precision"},
		{"license_type", "perpetual", "license_type"},
		{"license_key_prefix", "7KQ2", "must be 8 UTF-16 code units"},
		{"customer_name", strings.Repeat("x", 1001), `"customer_name" must be a string of at most 1000 UTF-16 code units`},
		{"customer_name", 5.0, `"customer_name" must be a string`},
		{"hardware_id", strings.Repeat("h", 257), `"hardware_id" must be a string of at most 256 UTF-16 code units`},
		{"entitlements", []any{entitlement("b", nil), entitlement("a", nil)}, "sorted by code"},
		{"entitlements", []any{entitlement("a", nil), entitlement("a", nil)}, "sorted by code"},
		{"entitlements", []any{entitlement("a", 1.5)}, "usage_limit"},
		{"entitlements", []any{entitlement("a", -1.0)}, "usage_limit"},
		{"entitlements", []any{entitlement("a", "5")}, "usage_limit"},
		{"entitlements", []any{entitlement("a", 9007199254740992.0)}, "usage_limit"},
		{"entitlements", []any{&Object{Names: []string{"code", "name"}, Values: map[string]any{"code": "a", "name": "A"}}}, `exactly "code", "name" and "usage_limit"`},
		{"entitlements", []any{"seats"}, "each entitlement must be an object"},
		{"entitlements", "seats", `"entitlements" must be an array`},
		{"encrypted_key", "AAAA", "encrypted_key"},
		{"valid_from", "2027-01-01T00:00:00Z", `after "valid_from"`},
		{"valid_from", "2026-12-31T23:59:59Z", `after "valid_from"`},
	}
	for _, c := range bad {
		_, err := f.verify(forge(t, with(f.payload, c.field, c.value), f.secret), "")
		refusedWith(t, err, CodeLicenseFileMalformed, c.reason)
	}
	_, err = f.verify(forge(t, with(f.payload, "encrypted_key", EncodeBase64(make([]byte, 60))), f.secret), "")
	refusedWith(t, err, CodeLicenseFileMalformed, `requires a "hardware_id"`)
	// Entitlement codes sort as UTF-16 code units: U+1F680 (D83D DE80) before U+E000.
	sorted := []any{entitlement("🚀", nil), entitlement("\ue000", nil)}
	if _, err := f.verify(forge(t, with(f.payload, "entitlements", sorted), f.secret), ""); err != nil {
		t.Fatalf("UTF-16 order refused: %v", err)
	}
	unsorted := []any{entitlement("\ue000", nil), entitlement("🚀", nil)}
	_, err = f.verify(forge(t, with(f.payload, "entitlements", unsorted), f.secret), "")
	refusedWith(t, err, CodeLicenseFileMalformed, "sorted by code")
	// An empty list is allowed.
	if _, err := f.verify(forge(t, with(f.payload, "entitlements", []any{}), f.secret), ""); err != nil {
		t.Fatal(err)
	}
}

func TestVersionFirst(t *testing.T) {
	f := newVerifyFixture(t)
	_, err := f.verify(forge(t, with(f.payload, "version", 3.0), f.secret), "")
	if e := refusedWith(t, err, CodeLicenseFileUnsupportedVersion); e.Message != "license file has format version 3; this license-server reads versions 1 and 2" {
		t.Fatal(e.Message)
	}
	// Version 2 is read: without a member of its own it is malformed (it would be written as version 1).
	_, err = f.verify(forge(t, with(f.payload, "version", 2.0), f.secret), "")
	refusedWith(t, err, CodeLicenseFileMalformed, `a version 2 file must carry "request_nonce" or "machine_key"`)
	_, err = f.verify(forge(t, with(f.payload, "version", 0.0), f.secret), "")
	refusedWith(t, err, CodeLicenseFileUnsupportedVersion, "format version 0")
	// Checked before anything else: a version 3 file may have other members.
	v2 := with(with(f.payload, "version", 3.0), "new_member", "x")
	_, err = f.verify(forge(t, with(v2, "license_id", remove), f.secret), "")
	refusedWith(t, err, CodeLicenseFileUnsupportedVersion)
	_, err = f.verify(forge(t, with(f.payload, "version", "1"), f.secret), "")
	refusedWith(t, err, CodeLicenseFileMalformed, `"version"`)
	_, err = f.verify(forge(t, with(f.payload, "version", 1.5), f.secret), "")
	refusedWith(t, err, CodeLicenseFileMalformed, `"version" is missing or not an integer`)
}

// reencode lays out a vector's document as another JSON writer might: members in
// reverse order, indented, with CRLF line ends.
func reencode(t *testing.T, payload *Object, signature string, change map[string]any) []byte {
	document := with(payload, "signature", signature)
	for name, value := range change {
		document = with(document, name, value)
	}
	var b strings.Builder
	b.WriteString("{\r\n")
	for i := len(document.Names) - 1; i >= 0; i-- {
		name := document.Names[i]
		value, err := Canonicalize(document.Values[name])
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("  " + Quote(name) + ": " + string(value))
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\r\n")
	}
	b.WriteString("}")
	return b64(b.String())
}

func TestNonCanonicalButCorrectlySigned(t *testing.T) {
	f := newVerifyFixture(t)
	keySet := mustKeySet(t, []byte(f.v.KeySetPEM))
	for _, vector := range f.v.Vectors {
		payload := parseObject(t, vector.Payload)
		file := reencode(t, payload, vector.SignatureBase64, nil)
		if strings.TrimSpace(string(file)) == strings.TrimSpace(vector.File) {
			t.Fatal("the re-encoding is the canonical file")
		}
		hardwareID := ""
		if vector.Binding != nil {
			hardwareID = vector.Binding.HardwareID
		}
		got, err := VerifyLicenseFile(file, VerifyOptions{Keys: keySet, HardwareID: hardwareID, Now: inWindow})
		if err != nil {
			t.Fatalf("%s: %v", vector.Name, err)
		}
		want, _ := VerifyLicenseFile([]byte(vector.File), VerifyOptions{Keys: keySet, HardwareID: hardwareID, Now: inWindow})
		if describePayload(got.Payload) != describePayload(want.Payload) || !bytes.Equal(got.DecryptionKey, want.DecryptionKey) {
			t.Fatalf("%s: the re-encoded file reads differently", vector.Name)
		}
	}
	// Non-ASCII written as \u escapes (an emoji as a surrogate pair), "/" as "\/", and
	// 25 as 25.0 or 2.5e1 are the same values too.
	bound := f.v.vector(t, "bound-with-key")
	canonical, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(bound.File))
	var escaped strings.Builder
	for _, r := range string(canonical) {
		switch {
		case r >= 0x10000:
			r -= 0x10000
			fmt.Fprintf(&escaped, "\\u%04x\\u%04X", 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		case r >= 0x80:
			fmt.Fprintf(&escaped, "\\u%04x", r)
		default:
			escaped.WriteRune(r)
		}
	}
	for _, limit := range []string{"25.0", "2.5e1", "250E-1"} {
		text := strings.Replace(escaped.String(), `"usage_limit":25`, `"usage_limit":`+limit, 1)
		text = strings.Replace(text, `"encrypted_key":"oKGio6SlpqeoqaqrKLN9IX41oggNpCnTupJ1ibaDxosukyUu/7NfIRELb9yL6xbDyi+50O0hNpPEDppL"`,
			`"encrypted_key":"oKGio6SlpqeoqaqrKLN9IX41oggNpCnTupJ1ibaDxosukyUu\/7NfIRELb9yL6xbDyi+50O0hNpPEDppL"`, 1)
		verified, err := f.verify(b64(text), f.hardwareID)
		if err != nil {
			t.Fatalf("%s: %v", limit, err)
		}
		if verified.Payload.CustomerName != "Müller & Söhne <GmbH> \"Ωmega\" \\ Zürich 🚀" {
			t.Fatalf("customer name %q", verified.Payload.CustomerName)
		}
	}
}

func TestReencodedWithOneChangedValue(t *testing.T) {
	f := newVerifyFixture(t)
	unbound := f.v.vector(t, "unbound")
	payload := parseObject(t, unbound.Payload)
	seats := &Object{Names: []string{"code", "name", "usage_limit"}, Values: map[string]any{"code": "seats", "name": "Seats", "usage_limit": 26.0}}
	changes := []map[string]any{
		{"valid_until": "2027-12-31T23:59:59Z"},
		{"customer_name": "Someone else"},
		{"entitlements": []any{seats}},
		{"hardware_id": "HW-some-other-machine"},
		{"license_type": "hybrid"},
	}
	for _, change := range changes {
		_, err := f.verify(reencode(t, payload, unbound.SignatureBase64, change), "")
		if e := refusedWith(t, err, CodeSignatureInvalid); e.Message != "signature verification failed" {
			t.Fatal(e.Message)
		}
	}
	// The canonical file with one value changed in place: the same.
	canonical, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(unbound.File))
	tampered := strings.Replace(string(canonical), `"usage_limit":25`, `"usage_limit":26`, 1)
	_, err := f.verify(b64(tampered), "")
	if e := refusedWith(t, err, CodeSignatureInvalid); e.Message != "signature verification failed" {
		t.Fatal(e.Message)
	}
}

func TestRepeatedMember(t *testing.T) {
	f := newVerifyFixture(t)
	canonical, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(string(f.unbound)))
	twice := strings.Replace(string(canonical), `"issuer":`, `"issuer":"elsewhere","issuer":`, 1)
	_, err := f.verify(b64(twice), "")
	refusedWith(t, err, CodeLicenseFileMalformed, `the member "issuer" appears twice in one object`)
	// Whichever copy comes first.
	twice = strings.Replace(string(canonical), `"issuer":"licenses.example.com"`, `"issuer":"licenses.example.com","issuer":"elsewhere"`, 1)
	_, err = f.verify(b64(twice), "")
	refusedWith(t, err, CodeLicenseFileMalformed, `"issuer" appears twice`)
	nested := strings.Replace(string(canonical), `"code":"seats"`, `"code":"seats","code":"seats"`, 1)
	_, err = f.verify(b64(nested), "")
	refusedWith(t, err, CodeLicenseFileMalformed, `"code" appears twice`)
	// The same name written with an escape is the same member.
	escaped := strings.Replace(string(canonical), `"issuer":`, `"iss\u0075er":"elsewhere","issuer":`, 1)
	_, err = f.verify(b64(escaped), "")
	refusedWith(t, err, CodeLicenseFileMalformed, `"issuer" appears twice`)
}

func TestLoneSurrogateIsMalformed(t *testing.T) {
	f := newVerifyFixture(t)
	canonical, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(string(f.unbound)))
	text := strings.Replace(string(canonical), `"customer_name":"`, `"customer_name":"\ud800`, 1)
	_, err := f.verify(b64(text), "")
	refusedWith(t, err, CodeLicenseFileMalformed, "lone surrogate")
}

func TestByteOrderMarkIsDropped(t *testing.T) {
	f := newVerifyFixture(t)
	canonical, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(string(f.unbound)))
	if _, err := f.verify(b64("\ufeff"+string(canonical)), ""); err != nil {
		t.Fatal(err)
	}
}

func describePayload(p Payload) string {
	limits := ""
	for _, e := range p.Entitlements {
		if e.UsageLimit != nil {
			limits += fmt.Sprintf(" %s=%d", e.Code, *e.UsageLimit)
		}
	}
	p.Entitlements = append([]Entitlement(nil), p.Entitlements...)
	for i := range p.Entitlements {
		p.Entitlements[i].UsageLimit = nil
	}
	return fmt.Sprintf("%+v%s", p, limits)
}
