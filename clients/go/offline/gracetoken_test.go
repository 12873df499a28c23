package offline

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// signToken makes a grace token as the server's encodeGraceToken does.
func signToken(header, claims string, key ed25519.PrivateKey) string {
	input := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claims))
	return input + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, []byte(input)))
}

func TestGraceTokenVector(t *testing.T) {
	v := loadLicVectors(t)
	g := loadGraceVector(t)
	second := v.secretKey(t, v.vector(t, "rotated-key"))
	if again := signToken(g.HeaderJSON, g.ClaimsJSON, second); again != g.Token {
		t.Fatalf("token:\n got %s\nwant %s", again, g.Token)
	}
	keySet := mustKeySet(t, readVectorFile(t, "key-set.pem"))
	inWindow := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	verified, err := VerifyGraceToken(g.Token, keySet, GraceTokenOptions{Now: inWindow, HardwareID: "HW-4f2a-9c1e-ü"})
	if err != nil {
		t.Fatal(err)
	}
	c := verified.Claims
	if verified.Header.Kid != "39f713d0a644253f" || verified.Header.Typ != "JWT" || c.LicenseID != "c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d" ||
		c.Sub != c.LicenseID || c.Iat != 1795341600 || c.Nbf != c.Iat || c.Exp != 1795600800 || c.LicenseKeyPrefix != "7KQ2-M9X" ||
		c.HardwareID != "HW-4f2a-9c1e-ü" || c.LicenseType != "hybrid" || c.LicenseValidUntil != "2026-12-31T23:59:59Z" ||
		len(c.Entitlements) != 2 || c.Entitlements[1].Code != "seats" || *c.Entitlements[1].UsageLimit != 25 || c.Entitlements[0].UsageLimit != nil {
		t.Fatalf("%+v", verified)
	}
	if !c.ExpiresAt().Equal(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)) {
		t.Fatal(c.ExpiresAt())
	}

	// With the TEST 1 key only, it fails naming the key id, without a signature check.
	_, err = VerifyGraceToken(g.Token, mustKeySet(t, []byte(v.PublicKeyPEM)), GraceTokenOptions{Now: inWindow})
	e := refusedWith(t, err, CodeGraceTokenInvalid)
	if want := "grace token is invalid: signature verification failed: it is signed by key 39f713d0a644253f, which is not in the key set given (key 21fe31dfa154a261)"; e.Message != want {
		t.Fatalf("message %q", e.Message)
	}

	// The JWK Set of the vector holds the same keys under the same ids.
	var jwks struct {
		Keys []struct{ X, Kid string }
	}
	if err := json.Unmarshal(g.JWKS, &jwks); err != nil {
		t.Fatal(err)
	}
	for i, k := range jwks.Keys {
		raw, _ := base64.RawURLEncoding.DecodeString(k.X)
		if KeyIDOf(raw) != k.Kid || k.Kid != keySet[i].KeyID || !bytes.Equal(raw, keySet[i].PublicKey) {
			t.Fatalf("jwk %d", i)
		}
	}
}

// The vector's accepted tokens are written otherwise than the server writes them (numbers
// with a fraction or an exponent, no kid, members the tables do not define); its refused
// tokens break a rule of docs/grace-token.md, each named by the message given there.
func TestGraceTokenVectorRefusals(t *testing.T) {
	g := loadGraceVector(t)
	keySet := mustKeySet(t, readVectorFile(t, "key-set.pem"))
	if !g.VerifiedAt.Equal(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)) {
		t.Fatal(g.VerifiedAt)
	}
	if _, err := VerifyGraceToken(g.Token, keySet, GraceTokenOptions{Now: g.VerifiedAt, HardwareID: g.HardwareID}); err != nil {
		t.Fatal(err)
	}
	if len(g.Accepted) < 3 || len(g.Refused) < 20 {
		t.Fatal("tokens missing from the vector")
	}
	for _, a := range g.Accepted {
		verified, err := VerifyGraceToken(a.Token, keySet, GraceTokenOptions{Now: g.VerifiedAt})
		if err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
		if verified.Claims.Iat != a.Iat || verified.Claims.Exp != a.Exp {
			t.Fatalf("%s: %+v", a.Name, verified.Claims)
		}
	}
	for _, r := range g.Refused {
		_, err := VerifyGraceToken(r.Token, keySet, GraceTokenOptions{Now: g.VerifiedAt})
		if err == nil {
			t.Fatalf("%s: accepted", r.Name)
		}
		if e := refusedWith(t, err, r.Code); e.Message != r.Message {
			t.Fatalf("%s: message %q, want %q", r.Name, e.Message, r.Message)
		}
	}
}

func TestGraceTokenRules(t *testing.T) {
	secret := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	keys := mustKeySet(t, secret.Public().(ed25519.PublicKey))
	const iat = 1800000000
	claims := `{"iss":"licenses.example.com","sub":"c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d","iat":1800000000,"nbf":1800000000,"exp":1800259200,"jti":"j","license_id":"c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d","license_key_prefix":"7KQ2-M9X","license_type":"hybrid","hardware_id":"hw","license_valid_until":"2027-01-01T00:00:00Z","entitlements":[{"code":"seats","name":"Seats","usage_limit":5}]}`
	// A kid that is not a key id (a UUID, from before key ids): every key is tried.
	token := signToken(`{"alg":"EdDSA","typ":"JWT","kid":"key-1"}`, claims, secret)
	at := func(seconds int64) GraceTokenOptions { return GraceTokenOptions{Now: time.Unix(seconds, 0)} }
	code := func(tok string, keys KeySet, opts GraceTokenOptions) string {
		_, err := VerifyGraceToken(tok, keys, opts)
		if err == nil {
			return "ACCEPTED"
		}
		return CodeOf(err)
	}

	verified, err := VerifyGraceToken(token, keys, GraceTokenOptions{Now: time.Unix(iat+10, 0), HardwareID: "hw"})
	if err != nil || verified.Header.Kid != "key-1" || verified.Claims.Entitlements[0].Code != "seats" {
		t.Fatal(err)
	}
	// Five minutes of leeway on nbf, none on exp.
	for seconds, want := range map[int64]string{
		iat - 300: "ACCEPTED", iat - 299: "ACCEPTED", iat - 301: CodeGraceTokenInvalid,
		iat + 72*3600 - 1: "ACCEPTED", iat + 72*3600: CodeGraceTokenExpired,
	} {
		if got := code(token, keys, at(seconds)); got != want {
			t.Errorf("at %d: %s, want %s", seconds-iat, got, want)
		}
	}
	_, err = VerifyGraceToken(token, keys, at(iat-301))
	refusedWith(t, err, CodeGraceTokenInvalid, "grace token is invalid: it is not valid yet (check the clock)")
	_, err = VerifyGraceToken(token, keys, GraceTokenOptions{Now: time.Unix(iat+72*3600, 999e6)})
	if e := refusedWith(t, err, CodeGraceTokenExpired); e.Message != "grace period expired at 2027-01-18T08:00:00.000Z" {
		t.Fatal(e.Message)
	}

	now := at(iat + 10)
	_, err = VerifyGraceToken(token, keys, GraceTokenOptions{Now: now.Now, HardwareID: "other"})
	if e := refusedWith(t, err, CodeHardwareMismatch); e.Message != "hardware ID mismatch" {
		t.Fatal(e.Message)
	}
	other := mustKeySet(t, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, 32)).Public().(ed25519.PublicKey))
	_, err = VerifyGraceToken(token, other, now)
	refusedWith(t, err, CodeGraceTokenInvalid, "grace token is invalid: signature verification failed")
	// A key set holding the key among others.
	if got := code(token, append(append(KeySet{}, other...), keys...), now); got != "ACCEPTED" {
		t.Fatal(got)
	}

	parts := strings.Split(token, ".")
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	refusals := map[string]string{
		enc(`{"alg":"none","typ":"JWT"}`) + "." + parts[1] + ".":             "not a compact JWS",
		enc(`{"alg":"none","typ":"JWT"}`) + "." + parts[1] + "." + parts[2]:  "the algorithm is not EdDSA",
		enc(`{"alg":"HS256","typ":"JWT"}`) + "." + parts[1] + "." + parts[2]: "the algorithm is not EdDSA",
		enc(`{"typ":"JWT"}`) + "." + parts[1] + "." + parts[2]:               "the algorithm is not EdDSA",
		enc(`not json`) + "." + parts[1] + "." + parts[2]:                    "the header is not JSON",
		enc(`["EdDSA"]`) + "." + parts[1] + "." + parts[2]:                   "the header is not a JSON object",
		parts[0] + "." + parts[1]:                                            "not a compact JWS",
		parts[0] + "." + parts[1] + "." + parts[2] + ".x":                    "not a compact JWS",
		parts[0] + "." + parts[1] + "." + parts[2] + "=":                     "not a compact JWS",
		parts[0] + "." + parts[1] + "." + parts[2][:85]:                      "not a compact JWS",
		parts[0] + "." + parts[1] + "." + parts[2][:84]:                      "the signature is not 64 bytes",
		parts[0] + "." + parts[1] + "." + parts[2][:85] + "x":                "not a compact JWS",
		"":                         "not a compact JWS",
		strings.Repeat("a", 16385): "not a token",
		parts[0] + "." + enc(strings.Replace(claims, `"exp":1800259200`, `"exp":1900000000`, 1)) + "." + parts[2]: "signature verification failed",
	}
	for tok, reason := range refusals {
		_, err := VerifyGraceToken(tok, keys, now)
		refusedWith(t, err, CodeGraceTokenInvalid, "grace token is invalid: "+reason)
	}
	for i := 0; i < len(token); i += 7 {
		changed := []byte(token)
		if changed[i] == 'A' {
			changed[i] = 'B'
		} else {
			changed[i] = 'A'
		}
		if string(changed) != token && code(string(changed), keys, now) == "ACCEPTED" {
			t.Fatalf("a change at %d went unnoticed", i)
		}
	}

	// Claims the verifier needs.
	for _, missing := range []string{`"iat":1800000000,`, `"sub":"c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d",`, `"hardware_id":"hw",`, `,"entitlements":[{"code":"seats","name":"Seats","usage_limit":5}]`} {
		tok := signToken(`{"alg":"EdDSA","typ":"JWT"}`, strings.Replace(claims, missing, "", 1), secret)
		_, err := VerifyGraceToken(tok, keys, now)
		refusedWith(t, err, CodeGraceTokenInvalid, "is missing")
	}
	tok := signToken(`{"alg":"EdDSA","typ":"JWT"}`, strings.Replace(claims, `"exp":1800259200`, `"exp":"1800259200"`, 1), secret)
	_, err = VerifyGraceToken(tok, keys, now)
	refusedWith(t, err, CodeGraceTokenInvalid, `"exp" is not an integer`)

	// A kid that is a key id names one key: another key's id is refused without a signature check.
	named := signToken(`{"alg":"EdDSA","typ":"JWT","kid":"`+other[0].KeyID+`"}`, claims, secret)
	_, err = VerifyGraceToken(named, append(append(KeySet{}, other...), keys...), now)
	refusedWith(t, err, CodeGraceTokenInvalid, "grace token is invalid: signature verification failed")
	if strings.Contains(err.Error(), "it is signed by key") {
		t.Fatal("the key is in the set: the signature simply does not verify under it")
	}
	_, err = VerifyGraceToken(named, keys, now)
	refusedWith(t, err, CodeGraceTokenInvalid, "it is signed by key "+other[0].KeyID+", which is not in the key set given (key "+keys[0].KeyID+")")
	own := signToken(`{"alg":"EdDSA","typ":"JWT","kid":"`+keys[0].KeyID+`"}`, claims, secret)
	if got := code(own, append(append(KeySet{}, other...), keys...), now); got != "ACCEPTED" {
		t.Fatal(got)
	}
}
