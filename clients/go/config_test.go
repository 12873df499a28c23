package client

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"licenseserver.example/client/hardwareid"
	"licenseserver.example/client/offline"
)

func TestConfigErrors(t *testing.T) {
	e := newEnv(t)
	base := func(change func(*Config)) Config {
		cfg := Config{ServerAddr: "127.0.0.1:1", LicenseKey: "K", Version: "1", HardwareID: "hw"}
		change(&cfg)
		return cfg
	}
	cases := []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Offline = OfflineConfig{Enabled: true, PublicKey: e.keys.keySetPEM} }, "license file path is required"},
		{func(c *Config) { c.Offline = OfflineConfig{Enabled: true, LicenseFile: "x.lic"} }, "public key is required"},
		{func(c *Config) {
			c.Offline = OfflineConfig{Enabled: true, LicenseFile: "x.lic", PublicKeys: [][]byte{}}
		}, "public key is required"},
		{func(c *Config) { c.ServerAddr = "http://x" }, "server address must be <host>:<port>"},
		{func(c *Config) { c.ServerAddr = "" }, "server address must be <host>:<port>"},
		{func(c *Config) { c.ServerAddr = "host name:80" }, "server address must be <host>:<port>"},
		{func(c *Config) { c.LicenseKey = "  " }, "license key is required"},
		{func(c *Config) { c.Version = "" }, "version is required"},
		{func(c *Config) { c.Offline = OfflineConfig{Enabled: true, LicenseFile: "x", PublicKey: []byte("nope")} },
			`public key must be 32 raw Ed25519 bytes or a PEM "PUBLIC KEY", or a list of them: Offline.PublicKey: no PEM "PUBLIC KEY" block`},
		{func(c *Config) {
			c.Offline.PublicKey = []byte(e.keys.firstPEM + "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1h\n-----END PRIVATE KEY-----\n")
		}, `Offline.PublicKey: block 2 is a private key ("PRIVATE KEY"); a key set holds public keys only`},
		{func(c *Config) { c.Offline.PublicKeys = [][]byte{[]byte(e.keys.firstPEM), e.keys.keySetPEM} }, "Offline.PublicKey: key 21fe31dfa154a261 appears twice"},
		{func(c *Config) { c.Offline.KeyRefresh.Interval = -time.Hour }, "Offline.KeyRefresh.Interval must be a positive duration"},
		{func(c *Config) {
			c.Offline.KeyRefresh.AllowKeys = []offline.AllowedKey{{KeyID: strings.Repeat("a", 16), Fingerprint: strings.Repeat("b", 64)}}
		}, "Offline.KeyRefresh.AllowKeys[0] must be {KeyID: 16 hex digits, Fingerprint: the key's 64 hex digits, which begin with its key id}"},
		{func(c *Config) { c.HardwareID = strings.Repeat("x", 257) }, "HardwareID must be at most 256 bytes of UTF-8, got 257"},
		{func(c *Config) { c.HardwareID = strings.Repeat("ü", 129) }, "HardwareID must be at most 256 bytes of UTF-8, got 258"},
		{func(c *Config) { c.HardwareID = "a\nb" }, "HardwareID must not contain control characters"},
		{func(c *Config) { c.HardwareID = "a\u0085b" }, "HardwareID must not contain control characters"},
		{func(c *Config) { c.HardwareID = "a\xffb" }, "HardwareID must be well-formed Unicode text"},
		{func(c *Config) { c.Offline.RetryInterval = -time.Second }, "RetryInterval must be a positive duration"},
		{func(c *Config) { c.RequestTimeout = -1 }, "RequestTimeout must be a positive duration"},
		{func(c *Config) { c.Offline.RetryInterval = 10 * time.Minute }, "MaxRetryInterval must not be less than RetryInterval"},
		{func(c *Config) { c.Offline.MaxRetryAttempts = -1 }, "MaxRetryAttempts must be a non-negative integer (0: unlimited)"},
	}
	for _, c := range cases {
		_, err := New(base(c.change))
		configErr, ok := err.(*ConfigError)
		if !ok || !strings.HasPrefix(configErr.Message, c.want) && !strings.Contains(configErr.Message, c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
	for _, addr := range []string{"licenses.example.com:8080", "127.0.0.1:1", "[::1]:8080", "localhost"} {
		if _, err := New(base(func(c *Config) { c.ServerAddr = addr })); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	// A key set is parsed even with offline mode off (a bad one is a mistake either way).
	if _, err := New(base(func(c *Config) { c.Offline.PublicKey = []byte("nope") })); err == nil {
		t.Error("a bad public key was accepted")
	}
}

func TestDefaults(t *testing.T) {
	e := newEnv(t)
	c, err := New(Config{ServerAddr: "127.0.0.1:1", LicenseKey: " 7kq2-m9xd-1rtv-abcd-efgh-jkmn-pqrs ", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	// hw2 where its sources can be read (Linux), hw1 elsewhere.
	if want, _ := hardwareid.Derive(); c.HardwareID() != want || !(strings.HasPrefix(want, "hw2-") && len(want) == 68 || strings.HasPrefix(want, "hw1-") && len(want) == 44) {
		t.Fatalf("derived hardware ID %q", c.HardwareID())
	}
	if c.cfg.retryInterval != 30*time.Second || c.cfg.maxRetry != 5*time.Minute || c.cfg.maxAttempts != 0 || c.cfg.requestTimeout != 10*time.Second {
		t.Fatalf("%+v", c.cfg)
	}
	if c.cfg.baseURL != "http://127.0.0.1:1" || c.keyPrefix != "7KQ2-M9X" || c.cfg.licenseKey != "7kq2-m9xd-1rtv-abcd-efgh-jkmn-pqrs" {
		t.Fatalf("%+v %s", c.cfg, c.keyPrefix)
	}
	// The same cache directory as the Node client for the same key, however it is typed.
	if cacheID(" 7kq2-m9xd-1rtv-abcd-efgh-jkmn-pqrs") != cacheID("7KQ2M9XD1RTVABCDEFGHJKMNPQRS") {
		t.Fatal("cache id")
	}
	https, _ := New(Config{ServerAddr: "x:1", HTTPS: true, LicenseKey: "k", Version: "1", HardwareID: "h"})
	if https.cfg.baseURL != "https://x:1" {
		t.Fatal(https.cfg.baseURL)
	}
	// Without Offline.CacheDir: license-server-client in the configuration directory.
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(e.dir, "xdg"))
	t.Setenv("HOME", filepath.Join(e.dir, "home"))
	if dir, _ := DefaultCacheDir(); dir != filepath.Join(e.dir, "xdg", "license-server-client") {
		t.Fatal(dir)
	}
	t.Setenv("XDG_CONFIG_HOME", "relative/path")
	if dir, _ := DefaultCacheDir(); dir != filepath.Join(e.dir, "home", ".config", "license-server-client") {
		t.Fatal(dir)
	}
}

// The Node client trims the key with String.prototype.trim and names the cache directory
// after it with /\s/: U+FEFF and U+3000 are space there, U+0085 (NEL) is not.
func TestKeyWhiteSpaceIsJavaScripts(t *testing.T) {
	if got := trimJS("\uFEFF\u3000 k\u2028\t"); got != "k" {
		t.Fatalf("%q", got)
	}
	if got := trimJS("\u0085k\u0085"); got != "\u0085k\u0085" {
		t.Fatalf("NEL trimmed: %q", got)
	}
	if cacheID("k\u0085") == cacheID("k") || cacheID("k\u3000") != cacheID("k") {
		t.Fatal("cache id")
	}
}

func TestLicenseKeyPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"7KQ2-M9XD-1RTV-ABCD-EFGH-JKMN-PQRS": "7KQ2-M9X",
		"7kq2m9xd1rtvabcdefghjkmnpqrs":       "7KQ2-M9X",
		"oil2-m9xd-1rtv-abcd-efgh-jkmn-pqrs": "0112-M9X",
		"not a key":                          "NOT A KE",
		"short":                              "SHORT",
	} {
		if got := licenseKeyPrefix(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
