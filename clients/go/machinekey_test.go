package client

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The machine-key vector (test/vectors/offline-license-v2-machine-key.json) read by the
// client on an air-gapped machine: its decryption key opens with Offline.MachinePrivateKey
// only (docs/client.md, "Machine-key binding").
func TestMachineKeyFileNeedsTheMachinesPrivateKey(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(vectorsDir, "offline-license-v2-machine-key.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		MachinePrivateKeyHex   string `json:"machine_private_key_hex"`
		EphemeralPrivateKeyHex string `json:"ephemeral_private_key_hex"`
		DecryptionKeyHex       string `json:"decryption_key_hex"`
		Payload                struct {
			HardwareID string `json:"hardware_id"`
			KeyPrefix  string `json:"license_key_prefix"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(filepath.Join(vectorsDir, "signing-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	validate := func(privateKey string) *Result {
		var key []byte
		if privateKey != "" {
			key, _ = hex.DecodeString(privateKey)
		}
		c, err := New(Config{
			Mode:       ModeOffline,
			LicenseKey: v.Payload.KeyPrefix + "D-1RTV-AAAA-BBBB-CCCC-DDDD-EEEE",
			Version:    "1.0.0",
			HardwareID: v.Payload.HardwareID,
			Clock:      newFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)),
			Offline: OfflineConfig{
				Enabled: true, CacheDir: t.TempDir(), LicenseFile: filepath.Join(vectorsDir, "machine-key.lic"),
				PublicKey: pem, MachinePrivateKey: key,
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.Validate()
	}
	with := validate(v.MachinePrivateKeyHex)
	if !with.Valid || hex.EncodeToString(with.DecryptionKey) != v.DecryptionKeyHex {
		t.Fatalf("with the machine's private key: %+v", with)
	}
	without := validate("")
	if without.Valid || without.DecryptionKey != nil || len(without.Failures) != 1 || without.Failures[0].Code != "MACHINE_KEY_MISSING" {
		t.Fatalf("without it: %+v", without)
	}
	other := validate(v.EphemeralPrivateKeyHex)
	if other.Valid || len(other.Failures) != 1 || other.Failures[0].Code != "DECRYPTION_FAILED" {
		t.Fatalf("with another machine's key: %+v", other)
	}
	if _, err := New(Config{Mode: ModeOffline, LicenseKey: "K", Version: "1", HardwareID: "h", Offline: OfflineConfig{Enabled: true, LicenseFile: "x", PublicKey: pem, MachinePrivateKey: make([]byte, 31)}}); err == nil {
		t.Fatal("a 31-byte MachinePrivateKey was taken")
	}
}

// A machine-key file a real server wrote, opened by the client with the machine's private
// key: run by test/clients/machine-key-e2e.test.ts, which passes the file and the keys in
// LICENSE_E2E_* variables (skipped otherwise).
func TestMachineKeyFileFromTheServer(t *testing.T) {
	file := os.Getenv("LICENSE_E2E_MACHINE_KEY_FILE")
	if file == "" {
		t.Skip("run by test/clients/machine-key-e2e.test.ts")
	}
	pem, err := os.ReadFile(os.Getenv("LICENSE_E2E_PUBLIC_KEY_FILE"))
	if err != nil {
		t.Fatal(err)
	}
	validateIn := func(cacheDir, privateKeyHex string) *Result {
		var key []byte
		if privateKeyHex != "" {
			if key, err = hex.DecodeString(privateKeyHex); err != nil {
				t.Fatal(err)
			}
		}
		c, err := New(Config{
			Mode: ModeOffline, LicenseKey: os.Getenv("LICENSE_E2E_LICENSE_KEY"), Version: "1.0.0", HardwareID: os.Getenv("LICENSE_E2E_HARDWARE_ID"),
			Offline: OfflineConfig{Enabled: true, CacheDir: cacheDir, LicenseFile: file, PublicKey: pem, MachinePrivateKey: key},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.Validate()
	}
	validate := func(privateKeyHex string) *Result { return validateIn(t.TempDir(), privateKeyHex) }
	with := validate(os.Getenv("LICENSE_E2E_MACHINE_PRIVATE_KEY_HEX"))
	if !with.Valid || hex.EncodeToString(with.DecryptionKey) != os.Getenv("LICENSE_E2E_DECRYPTION_KEY_HEX") {
		t.Fatalf("with the machine's private key: %+v", with)
	}
	if without := validate(""); without.Valid || without.DecryptionKey != nil || without.Reason != "MACHINE_KEY_MISSING" {
		t.Fatalf("without it: %+v", without)
	}
	t.Logf("opened %s with the machine's private key", filepath.Base(file))
	// The cache directory the Node client's request and install used: its machine-key.json opens the file.
	if cacheDir := os.Getenv("LICENSE_E2E_CACHE_DIR"); cacheDir != "" {
		if cached := validateIn(cacheDir, ""); !cached.Valid || hex.EncodeToString(cached.DecryptionKey) != os.Getenv("LICENSE_E2E_DECRYPTION_KEY_HEX") {
			t.Fatalf("with the Node client's cache and no private key given: %+v", cached)
		}
		t.Logf("opened %s with the key of the Node client's cache", filepath.Base(file))
	}
}

// TestMachineKeyOnlineFromTheServer is run by test/clients/machine-key-online.test.ts against
// a real serve: a machine-key license's online answer is sealed to the machine key recorded
// from the machine's request, and opens with the key in that machine's cache only.
func TestMachineKeyOnlineFromTheServer(t *testing.T) {
	addr := os.Getenv("LICENSE_E2E_SERVER_ADDR")
	if addr == "" {
		t.Skip("run by test/clients/machine-key-online.test.ts")
	}
	validateIn := func(cacheDir string) *Result {
		c, err := New(Config{
			ServerAddr: addr, LicenseKey: os.Getenv("LICENSE_E2E_LICENSE_KEY"), Version: "1.0.0", HardwareID: os.Getenv("LICENSE_E2E_HARDWARE_ID"),
			RequestTimeout: 5 * time.Second,
			Offline:        OfflineConfig{Enabled: true, CacheDir: cacheDir, LicenseFile: os.Getenv("LICENSE_E2E_LICENSE_FILE"), PublicKey: []byte(os.Getenv("LICENSE_E2E_PUBLIC_KEY_PEM"))},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.Validate()
	}
	if own := validateIn(os.Getenv("LICENSE_E2E_CACHE_DIR")); !own.Valid || own.Source != TierOnline || hex.EncodeToString(own.DecryptionKey) != os.Getenv("LICENSE_E2E_DECRYPTION_KEY_HEX") {
		t.Fatalf("with the machine's cache: %+v", own)
	}
	t.Log("opened the online answer with the key of the machine's cache")
	if other := validateIn(t.TempDir()); other.Valid || other.DecryptionKey != nil || other.Reason != "MACHINE_KEY_MISSING" {
		t.Fatalf("with another cache: %+v", other)
	}
	t.Log("another cache opens nothing: MACHINE_KEY_MISSING")
}
