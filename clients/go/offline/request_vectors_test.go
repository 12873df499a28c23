package offline

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// test/vectors/activation-request-v1.json (the activation request file) and
// test/vectors/offline-license-v2.json (.lic version 2 with request_nonce), as
// docs/offline-license-format.md sections 12 and 13 pin them.
type requestJSON struct {
	Format             string  `json:"format"`
	Version            float64 `json:"version"`
	LicenseKeyPrefix   string  `json:"license_key_prefix"`
	LicenseKeyDigest   string  `json:"license_key_digest"`
	HardwareID         string  `json:"hardware_id"`
	PreviousHardwareID string  `json:"previous_hardware_id"`
	MachineName        string  `json:"machine_name"`
	AppVersion         string  `json:"app_version"`
	MachineKey         string  `json:"machine_key"`
	Nonce              string  `json:"nonce"`
	CreatedAt          string  `json:"created_at"`
}

func (r requestJSON) request() ActivationRequest {
	return ActivationRequest{
		LicenseKeyPrefix: r.LicenseKeyPrefix, LicenseKeyDigest: r.LicenseKeyDigest, HardwareID: r.HardwareID,
		PreviousHardwareID: r.PreviousHardwareID, MachineName: r.MachineName, AppVersion: r.AppVersion,
		MachineKey: r.MachineKey, Nonce: r.Nonce, CreatedAt: r.CreatedAt,
	}
}

type requestVectors struct {
	LicenseKey            string      `json:"license_key"`
	LicenseKeyDigestInput string      `json:"license_key_digest_input"`
	LicenseKeyDigest      string      `json:"license_key_digest"`
	MachinePublicKeyHex   string      `json:"machine_public_key_hex"`
	NonceHex              string      `json:"nonce_hex"`
	Request               requestJSON `json:"request"`
	CanonicalJSON         string      `json:"canonical_json"`
	Text                  string      `json:"text"`
	Accept                []struct {
		Name    string      `json:"name"`
		Request requestJSON `json:"request"`
		Text    string      `json:"text"`
	} `json:"accept"`
	Refuse []struct {
		Name          string `json:"name"`
		Text          string `json:"text"`
		Message       string `json:"message"`
		MachineKeyHex string `json:"machine_key_hex"`
	} `json:"refuse"`
}

// nfcOnly are the refusals that need a Unicode normaliser, which Go's standard library
// has not (the server, which reads requests, has one).
var nfcOnly = map[string]bool{"hardware-id-not-nfc": true}

func TestActivationRequestVectors(t *testing.T) {
	var v requestVectors
	if err := json.Unmarshal(readVectorFile(t, "activation-request-v1.json"), &v); err != nil {
		t.Fatal(err)
	}
	if v.LicenseKeyDigestInput != LicenseKeyDigestContext+v.LicenseKey || LicenseKeyDigest(v.LicenseKey) != v.LicenseKeyDigest {
		t.Fatalf("digest %s", LicenseKeyDigest(v.LicenseKey))
	}
	want := v.Request.request()
	if key, ok := DecodeBase64URLStrict(want.MachineKey, MachineKeyBytes); !ok || hex.EncodeToString(key) != v.MachinePublicKeyHex {
		t.Fatalf("machine key %x", key)
	}
	if nonce, ok := DecodeBase64URLStrict(want.Nonce, RequestNonceBytes); !ok || hex.EncodeToString(nonce) != v.NonceHex {
		t.Fatalf("nonce %x", nonce)
	}
	if canonical, err := Canonicalize(want.object()); err != nil || string(canonical) != v.CanonicalJSON {
		t.Fatalf("canonical %s %v", canonical, err)
	}
	text, err := EncodeActivationRequest(&want)
	if err != nil || text != v.Text {
		t.Fatalf("text\n%s\n%v", text, err)
	}
	if string(readVectorFile(t, "activation-request.txt")) != v.Text {
		t.Fatal("activation-request.txt is not the vector's text")
	}
	got, err := DecodeActivationRequest([]byte(v.Text))
	if err != nil || *got != want {
		t.Fatalf("decoded %+v %v", got, err)
	}
	for _, vector := range v.Accept {
		t.Run("accept "+vector.Name, func(t *testing.T) {
			got, err := DecodeActivationRequest([]byte(vector.Text))
			if err != nil || *got != vector.Request.request() {
				t.Fatalf("decoded %+v %v", got, err)
			}
		})
	}
	if len(v.Refuse) < 20 {
		t.Fatal("too few refusals")
	}
	smallOrder := 0
	for _, vector := range v.Refuse {
		if vector.MachineKeyHex == "" {
			continue
		}
		// This package's own X25519 agrees: the shared secret with any private key is all zeros.
		smallOrder++
		point, _ := hex.DecodeString(vector.MachineKeyHex)
		private, _, err := GenerateX25519()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := X25519(private, point); err == nil || !IsSmallOrderPoint(point) {
			t.Fatalf("%s: X25519 gave a result (%v), or the point is not on the list", vector.Name, err)
		}
	}
	if smallOrder != len(SmallOrderPoints)+2 {
		t.Fatalf("%d vectors of small order, want %d", smallOrder, len(SmallOrderPoints)+2)
	}
	for _, vector := range v.Refuse {
		if nfcOnly[vector.Name] {
			continue
		}
		t.Run("refuse "+vector.Name, func(t *testing.T) {
			_, err := DecodeActivationRequest([]byte(vector.Text))
			if e := refusedWith(t, err, CodeActivationRequestMalformed); e.Message != vector.Message {
				t.Fatalf("message %q, want %q", e.Message, vector.Message)
			}
		})
	}
}

type v2Vectors struct {
	PublicKeyPEM string `json:"public_key_pem"`
	Now          string `json:"now"`
	Vectors      []struct {
		Name             string          `json:"name"`
		Payload          json.RawMessage `json:"payload"`
		CanonicalHex     string          `json:"canonical_payload_hex"`
		File             string          `json:"file"`
		HardwareID       string          `json:"hardware_id"`
		DecryptionKeyHex string          `json:"decryption_key_hex"`
		RequestNonce     string          `json:"request_nonce"`
		MachinePrivHex   string          `json:"machine_private_key_hex"`
		LicFile          string          `json:"lic_file"`
	} `json:"vectors"`
	Refuse []struct {
		Name    string `json:"name"`
		File    string `json:"file"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"refuse"`
}

func TestLicenseFileV2Vectors(t *testing.T) {
	var v v2Vectors
	if err := json.Unmarshal(readVectorFile(t, "offline-license-v2.json"), &v); err != nil {
		t.Fatal(err)
	}
	keys := mustKeySet(t, []byte(v.PublicKeyPEM))
	now, err := time.Parse(time.RFC3339, v.Now)
	if err != nil {
		t.Fatal(err)
	}
	lic := loadLicVectors(t)
	if len(v.Vectors) == 0 || len(v.Refuse) == 0 {
		t.Fatal("no vectors")
	}
	for _, vector := range v.Vectors {
		t.Run(vector.Name, func(t *testing.T) {
			opts := VerifyOptions{Keys: keys, HardwareID: vector.HardwareID, Now: now}
			if vector.MachinePrivHex != "" {
				// The file alone does not open a machine-key file's decryption key (section 14).
				var refused *Error
				if _, err := VerifyLicenseFile([]byte(vector.File), opts); !errors.As(err, &refused) || refused.Code != "MACHINE_KEY_MISSING" {
					t.Fatalf("without the machine's private key: %v", err)
				}
				opts.MachinePrivateKey, _ = hex.DecodeString(vector.MachinePrivHex)
			}
			verified, err := VerifyLicenseFile([]byte(vector.File), opts)
			if err != nil {
				t.Fatal(err)
			}
			p := verified.Payload
			if p.Version != 2 || p.RequestNonce != vector.RequestNonce || hex.EncodeToString(verified.DecryptionKey) != vector.DecryptionKeyHex {
				t.Fatalf("version %d, nonce %q, key %x", p.Version, p.RequestNonce, verified.DecryptionKey)
			}
			decoded, err := DecodeLicenseFile([]byte(vector.File))
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(decoded.SignedBytes) != vector.CanonicalHex {
				t.Fatalf("signed bytes %s", decoded.SignedBytes)
			}
			// This package's writer path (forge: canonical JSON, Ed25519, Base64) makes the same file.
			if string(forge(t, parseObject(t, vector.Payload), lic.secretKey(t, nil))) != vector.File {
				t.Fatal("the file made from the payload differs")
			}
			if string(readVectorFile(t, vector.LicFile)) != vector.File {
				t.Fatalf("%s is not the vector's file", vector.LicFile)
			}
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
