package client

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"licenseserver.example/client/offline"
)

// TestKeyRefreshAgainstServer is run by test/clients/go-key-refresh.test.ts against a real
// serve process whose key was rotated after the application was built: KR_SERVER is its
// host:port, KR_FIRST_KEY the PEM of its first key (all the application ships),
// KR_LICENSE_FILE a .lic the second key signed, KR_JWKS the public JWK Set with both keys,
// KR_WORK a directory for the caches. Skipped without them.
func TestKeyRefreshAgainstServer(t *testing.T) {
	server := os.Getenv("KR_SERVER")
	if server == "" {
		t.Skip("run by test/clients/go-key-refresh.test.ts against a real server")
	}
	work := os.Getenv("KR_WORK")
	var jwks struct {
		Keys []offline.JWK `json:"keys"`
	}
	if err := json.Unmarshal([]byte(os.Getenv("KR_JWKS")), &jwks); err != nil || len(jwks.Keys) != 2 {
		t.Fatalf("KR_JWKS: %v", err)
	}
	first, second := jwks.Keys[1], jwks.Keys[0] // the active (second) key comes first
	newClient := func(addr, cache, licenseFile string, refresh KeyRefreshConfig) *Client {
		t.Helper()
		c, err := New(Config{
			ServerAddr: addr, LicenseKey: os.Getenv("KR_LICENSE_KEY"), Version: "1.0", HardwareID: "GO-KEY-REFRESH",
			RequestTimeout: 2 * time.Second, ConnectTimeout: 500 * time.Millisecond,
			Offline: OfflineConfig{
				Enabled: true, CacheDir: filepath.Join(work, cache), LicenseFile: licenseFile,
				PublicKey: []byte(os.Getenv("KR_FIRST_KEY")), RetryInterval: time.Hour, MaxRetryInterval: time.Hour,
				KeyRefresh: refresh,
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	once := func(c *Client) *Result {
		defer c.Close()
		return c.Validate()
	}
	licenseFile := os.Getenv("KR_LICENSE_FILE")
	missing := filepath.Join(work, "missing.lic")
	on := KeyRefreshConfig{Enabled: true}

	t.Run("without a refresh the rotated key's token and file do not verify", func(t *testing.T) {
		c := newClient(server, "go-plain", licenseFile, KeyRefreshConfig{})
		if r := once(c); !r.Valid {
			t.Fatalf("online: %+v", r.Failures)
		}
		if _, err := os.Stat(filepath.Join(c.CacheDir(), "grace.json")); err == nil {
			t.Fatal("a grace token of an unknown key was cached")
		}
		r := once(newClient("127.0.0.1:9", "go-plain", licenseFile, KeyRefreshConfig{}))
		if r.Valid || !strings.Contains(failureIn(r, TierLicenseFile), "signed by key "+second.Kid+", which is not in the key set") {
			t.Fatalf("offline without refresh: %+v", r.Failures)
		}
	})

	t.Run("with a refresh the grace token and the .lic of the rotated key verify, also after an offline start", func(t *testing.T) {
		c := newClient(server, "go-refresh", licenseFile, on)
		if r := once(c); !r.Valid {
			t.Fatalf("online: %+v", r.Failures)
		}
		grace, err := os.ReadFile(filepath.Join(c.CacheDir(), "grace.json"))
		if err != nil || kidOf(jsonField(t, grace, "token")) != second.Kid {
			t.Fatalf("the grace token of the new key is not cached: %v %s", err, grace)
		}
		if r := once(newClient("127.0.0.1:9", "go-refresh", licenseFile, on)); !r.Valid || r.Source != TierLicenseFile {
			t.Fatalf("offline from the file: %+v", r.Failures)
		}
		if r := once(newClient("127.0.0.1:9", "go-refresh", missing, on)); !r.Valid || r.Source != TierGraceToken {
			t.Fatalf("offline from the grace token: %+v", r.Failures)
		}
	})

	// A server of someone else's: it answers the key set it is given, and 503 to validations.
	var served any
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/.well-known/jwks.json" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(served)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer fake.Close()
	fakeAddr := strings.TrimPrefix(fake.URL, "http://")

	t.Run("a key without a valid endorsement from a trusted key is refused", func(t *testing.T) {
		strangerPublic, stranger, _ := ed25519.GenerateKey(rand.Reader)
		secondKey, _ := base64.RawURLEncoding.DecodeString(second.X)
		strangerID := offline.KeyIDOf(strangerPublic)
		tampered := second
		tampered.Endorsements = nil
		for _, e := range second.Endorsements {
			signature, _ := base64.RawURLEncoding.DecodeString(e.Signature)
			signature[5] ^= 1
			tampered.Endorsements = append(tampered.Endorsements, offline.JWKEndorsement{SignerKeyID: e.SignerKeyID, Signature: base64.RawURLEncoding.EncodeToString(signature)})
		}
		bare := second
		bare.Endorsements = nil
		byStranger := second
		byStranger.Endorsements = []offline.JWKEndorsement{{SignerKeyID: strangerID, Signature: base64.RawURLEncoding.EncodeToString(ed25519.Sign(stranger, offline.EndorsementStatement(secondKey)))}}
		strangerJWK := offline.JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(strangerPublic), Kid: strangerID}
		misnamed := second
		misnamed.Kid = first.Kid
		for name, keys := range map[string][]offline.JWK{"bare": {bare}, "tampered": {tampered}, "stranger": {strangerJWK, byStranger}, "misnamed": {misnamed}} {
			served = map[string]any{"keys": keys}
			c := newClient(fakeAddr, "go-fake-"+name, licenseFile, on)
			result := c.RefreshKeys(context.Background())
			if !result.Fetched || len(result.Accepted) != 0 || len(result.Trusted) != 1 {
				t.Fatalf("%s: %+v", name, result)
			}
			if r := once(c); r.Valid {
				t.Fatalf("%s: the .lic of the second key verified", name)
			}
		}
	})

	t.Run("a key the application allows by key id and fingerprint is taken", func(t *testing.T) {
		bare := second
		bare.Endorsements = nil
		served = map[string]any{"keys": []offline.JWK{bare}}
		wrong := newClient(fakeAddr, "go-allow-wrong", licenseFile, KeyRefreshConfig{Enabled: true, AllowKeys: []offline.AllowedKey{{KeyID: second.Kid, Fingerprint: second.Kid + strings.Repeat("0", 48)}}})
		if result := wrong.RefreshKeys(context.Background()); len(result.Accepted) != 0 {
			t.Fatalf("a wrong fingerprint allowed %v", result.Accepted)
		}
		wrong.Close()
		c := newClient(fakeAddr, "go-allow", licenseFile, KeyRefreshConfig{Enabled: true, AllowKeys: []offline.AllowedKey{{KeyID: second.Kid, Fingerprint: os.Getenv("KR_SECOND_FINGERPRINT")}}})
		if result := c.RefreshKeys(context.Background()); len(result.Accepted) != 1 || result.Accepted[0] != second.Kid {
			t.Fatalf("allowed: %+v", result)
		}
		if r := once(c); !r.Valid || r.Source != TierLicenseFile {
			t.Fatalf("allowed key: %+v", r.Failures)
		}
	})

	t.Run("a cache file cannot add a key by itself", func(t *testing.T) {
		c := newClient("127.0.0.1:9", "go-forged", licenseFile, on)
		bare := second
		bare.Endorsements = nil
		if err := c.store.writeJSON("keys.json", keysFile{FetchedAt: isoMillis(time.Now()), Keys: []offline.JWK{bare}}); err != nil {
			t.Fatal(err)
		}
		if r := once(c); r.Valid {
			t.Fatal("the .lic of the second key verified from a keys.json that only claims the key")
		}
		// The same file with the endorsement: taken.
		c = newClient("127.0.0.1:9", "go-forged", licenseFile, on)
		if err := c.store.writeJSON("keys.json", keysFile{FetchedAt: isoMillis(time.Now()), Keys: []offline.JWK{second}}); err != nil {
			t.Fatal(err)
		}
		if r := once(c); !r.Valid {
			t.Fatalf("with its endorsement: %+v", r.Failures)
		}
	})
}

func failureIn(r *Result, tier Tier) string {
	for _, f := range r.Failures {
		if f.Tier == tier {
			return f.Message
		}
	}
	return ""
}

func jsonField(t *testing.T, data []byte, name string) string {
	t.Helper()
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	s, _ := fields[name].(string)
	return s
}
