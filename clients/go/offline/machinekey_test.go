package offline

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

type machineKeyVector struct {
	MachinePrivateKeyHex   string          `json:"machine_private_key_hex"`
	MachinePublicKeyHex    string          `json:"machine_public_key_hex"`
	MachineKey             string          `json:"machine_key"`
	EphemeralPrivateKeyHex string          `json:"ephemeral_private_key_hex"`
	DecryptionKeyHex       string          `json:"decryption_key_hex"`
	InfoHex                string          `json:"info_hex"`
	EncHex                 string          `json:"enc_hex"`
	SharedSecretHex        string          `json:"shared_secret_hex"`
	KeyHex                 string          `json:"key_hex"`
	BaseNonceHex           string          `json:"base_nonce_hex"`
	EncryptedKey           string          `json:"encrypted_key"`
	Payload                json.RawMessage `json:"payload"`
	CanonicalPayload       string          `json:"canonical_payload"`
	File                   string          `json:"file"`
}

func loadMachineKeyVector(t *testing.T) *machineKeyVector {
	t.Helper()
	var v machineKeyVector
	if err := json.Unmarshal(readVectorFile(t, "offline-license-v2-machine-key.json"), &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

// The machine-key vector: every byte of the HPKE sealing, then the file as a reader meets it.
func TestMachineKeyVector(t *testing.T) {
	v := loadMachineKeyVector(t)
	public, err := X25519PublicKey(mustHex(t, v.MachinePrivateKeyHex))
	if err != nil || hex.EncodeToString(public) != v.MachinePublicKeyHex || EncodeMachineKey(public) != v.MachineKey {
		t.Fatalf("machine key %x %v", public, err)
	}
	decoded, err := DecodeLicenseFile([]byte(v.File))
	if err != nil {
		t.Fatal(err)
	}
	p := decoded.Payload
	if p.Version != 2 || p.MachineKey != v.MachineKey || p.EncryptedKey != v.EncryptedKey || string(decoded.SignedBytes) != v.CanonicalPayload {
		t.Fatalf("decoded %+v", p)
	}
	if got := hex.EncodeToString(MachineKeyInfo(p.LicenseID, p.HardwareID)); got != v.InfoHex {
		t.Fatalf("info %s", got)
	}
	shared, enc, err := hpkeEncap(public, mustHex(t, v.EphemeralPrivateKeyHex))
	if err != nil || hex.EncodeToString(enc) != v.EncHex || hex.EncodeToString(shared) != v.SharedSecretHex {
		t.Fatalf("encap %x %x %v", enc, shared, err)
	}
	s := hpkeKeyScheduleBase(shared, mustHex(t, v.InfoHex))
	if hex.EncodeToString(s.key) != v.KeyHex || hex.EncodeToString(s.baseNonce) != v.BaseNonceHex {
		t.Fatalf("key schedule %x %x", s.key, s.baseNonce)
	}
	sealed, err := SealForMachine(mustHex(t, v.DecryptionKeyHex), public, p.LicenseID, p.HardwareID, mustHex(t, v.EphemeralPrivateKeyHex))
	if err != nil || sealed != v.EncryptedKey {
		t.Fatalf("SealForMachine %s %v", sealed, err)
	}

	keys := mustKeySet(t, readVectorFile(t, "signing-key.pem"))
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	verified, err := VerifyLicenseFile([]byte(v.File), VerifyOptions{Keys: keys, HardwareID: p.HardwareID, MachinePrivateKey: mustHex(t, v.MachinePrivateKeyHex), Now: now})
	if err != nil || hex.EncodeToString(verified.DecryptionKey) != v.DecryptionKeyHex {
		t.Fatalf("verify with the machine's private key: %v", err)
	}
	if _, err := VerifyLicenseFile([]byte(v.File), VerifyOptions{Keys: keys, HardwareID: p.HardwareID, Now: now}); CodeOf(err) != CodeMachineKeyMissing {
		t.Fatalf("without the private key: %v", err)
	}
	if _, err := VerifyLicenseFile([]byte(v.File), VerifyOptions{Keys: keys, HardwareID: p.HardwareID, MachinePrivateKey: mustHex(t, v.EphemeralPrivateKeyHex), Now: now}); CodeOf(err) != CodeDecryptionFailed {
		t.Fatalf("with another private key: %v", err)
	}
	// Everything in the file: v1's HKDF of hardware_id and license_id, and the public key.
	if _, err := UnsealDecryptionKey(p.EncryptedKey, p.HardwareID, p.LicenseID); CodeOf(err) != CodeDecryptionFailed {
		t.Fatalf("v1 construction on a machine-key file: %v", err)
	}
	if _, err := UnsealForMachine(p.EncryptedKey, p.MachineKey, p.LicenseID, p.HardwareID, public); CodeOf(err) != CodeDecryptionFailed {
		t.Fatalf("the public key as the private one: %v", err)
	}
}

func TestMachineKeyReaderRefusals(t *testing.T) {
	v := loadMachineKeyVector(t)
	var payload map[string]interface{}
	if err := json.Unmarshal(v.Payload, &payload); err != nil {
		t.Fatal(err)
	}
	decoded, _ := DecodeLicenseFile([]byte(v.File))
	file := func(change func(map[string]interface{})) []byte {
		p := map[string]interface{}{}
		for k, value := range payload {
			p[k] = value
		}
		change(p)
		p["signature"] = EncodeBase64(decoded.Signature)
		text, _ := json.Marshal(p)
		return []byte(EncodeBase64(text))
	}
	for name, c := range map[string]struct {
		change func(map[string]interface{})
		code   string
		text   string
	}{
		"v2 without a v2 member":   {func(p map[string]interface{}) { delete(p, "machine_key"); delete(p, "encrypted_key") }, CodeLicenseFileMalformed, `must carry "request_nonce" or "machine_key"`},
		"machine_key in v1":        {func(p map[string]interface{}) { p["version"] = 1 }, CodeLicenseFileMalformed, "not part of format version 1"},
		"version 3":                {func(p map[string]interface{}) { p["version"] = 3 }, CodeLicenseFileUnsupportedVersion, "versions 1 and 2"},
		"padded machine_key":       {func(p map[string]interface{}) { p["machine_key"] = v.MachineKey + "=" }, CodeLicenseFileMalformed, "machine_key"},
		"short machine_key":        {func(p map[string]interface{}) { p["machine_key"] = v.MachineKey[:42] }, CodeLicenseFileMalformed, "machine_key"},
		"machine_key, no hardware": {func(p map[string]interface{}) { p["hardware_id"] = "" }, CodeLicenseFileMalformed, ""},
		"60-byte encrypted_key":    {func(p map[string]interface{}) { p["encrypted_key"] = strings.Repeat("A", 80) }, CodeLicenseFileMalformed, "80 bytes"},
	} {
		_, err := DecodeLicenseFile(file(c.change))
		if CodeOf(err) != c.code || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
