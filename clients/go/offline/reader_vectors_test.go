package offline

import (
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"
)

// test/vectors/offline-license-v1-readers.json: files the server's writer does not make
// but a reader meets (numbers written 1.0 or 2.5E1, hardware IDs that are not NFC or
// longer than 256 bytes), and what every reader does with them
// (docs/offline-license-format.md sections 3 and 7).
type readerVectors struct {
	PublicKeyPEM string `json:"public_key_pem"`
	Now          string `json:"now"`
	Accept       []struct {
		Name             string          `json:"name"`
		File             string          `json:"file"`
		HardwareID       string          `json:"hardware_id"`
		NFCHardwareID    string          `json:"nfc_hardware_id"`
		Payload          json.RawMessage `json:"payload"`
		CanonicalHex     string          `json:"canonical_payload_hex"`
		DecryptionKeyHex string          `json:"decryption_key_hex"`
	} `json:"accept"`
	Refuse []struct {
		Name    string `json:"name"`
		File    string `json:"file"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"refuse"`
}

func TestReaderVectors(t *testing.T) {
	var v readerVectors
	if err := json.Unmarshal(readVectorFile(t, "offline-license-v1-readers.json"), &v); err != nil {
		t.Fatal(err)
	}
	if v.PublicKeyPEM != string(readVectorFile(t, "signing-key.pem")) {
		t.Fatal("the vectors' key is not signing-key.pem")
	}
	keys := mustKeySet(t, []byte(v.PublicKeyPEM))
	now, err := time.Parse(time.RFC3339, v.Now)
	if err != nil {
		t.Fatal(err)
	}
	lic := loadLicVectors(t)
	if len(v.Accept) == 0 || len(v.Refuse) == 0 {
		t.Fatal("no vectors")
	}
	for _, vector := range v.Accept {
		t.Run("accept "+vector.Name, func(t *testing.T) {
			decoded, err := DecodeLicenseFile([]byte(vector.File))
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(decoded.SignedBytes) != vector.CanonicalHex {
				t.Fatalf("signed bytes %s", decoded.SignedBytes)
			}
			// The payload as this reader reads the canonical file of the expected payload.
			want, err := DecodeLicenseFile(forge(t, parseObject(t, vector.Payload), lic.secretKey(t, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if describePayload(decoded.Payload) != describePayload(want.Payload) {
				t.Fatalf("payload\n got %s\nwant %s", describePayload(decoded.Payload), describePayload(want.Payload))
			}
			// This reader compares hardware IDs exactly (the standard library has no NFC):
			// nfc_hardware_id, which a normalising reader also accepts, is not tried here.
			verified, err := VerifyLicenseFile([]byte(vector.File), VerifyOptions{Keys: keys, HardwareID: vector.HardwareID, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if !verified.HardwareChecked || hex.EncodeToString(verified.DecryptionKey) != vector.DecryptionKeyHex {
				t.Fatalf("checked %v, decryption key %x", verified.HardwareChecked, verified.DecryptionKey)
			}
			_, err = VerifyLicenseFile([]byte(vector.File), VerifyOptions{Keys: keys, HardwareID: "another-machine", Now: now})
			refusedWith(t, err, CodeHardwareMismatch)
		})
	}
	for _, vector := range v.Refuse {
		t.Run("refuse "+vector.Name, func(t *testing.T) {
			_, err := VerifyLicenseFile([]byte(vector.File), VerifyOptions{Keys: keys, SkipHardwareCheck: true, Now: now})
			if e := refusedWith(t, err, vector.Code); e.Message != vector.Message {
				t.Fatalf("message %q, want %q", e.Message, vector.Message)
			}
		})
	}
}
