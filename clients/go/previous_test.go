package client

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"licenseserver.example/client/offline"
)

var (
	testHW2     = "hw2-" + strings.Repeat("a", 64)
	testOldHW1  = "hw1-" + strings.Repeat("1", 40)
	testNowHW1  = "hw1-" + strings.Repeat("2", 40)
	quietWrites = save(quietSave)
)

// tokenWithHardwareID is an unsigned JWS whose payload has this hardware_id: only the claim
// is read, as a hint.
func tokenWithHardwareID(id string) string {
	return "e30." + base64.RawURLEncoding.EncodeToString([]byte(`{"hardware_id":"`+id+`"}`)) + ".sig"
}

func previousClient(t *testing.T, dir string, change func(*resolved)) *Client {
	cfg := &resolved{hardwareID: testHW2, hardwareIDDerived: true, enabled: true, cacheDir: dir}
	if change != nil {
		change(cfg)
	}
	return &Client{cfg: cfg, store: newStore(dir, "KEY")}
}

func withDerivedHW1(t *testing.T, id string) {
	saved := deriveHW1
	deriveHW1 = func() (string, error) { return id, nil }
	t.Cleanup(func() { deriveHW1 = saved })
}

// The same order as the Node client (test/client/previous-hardware-id.test.ts).
func TestPreviousHardwareIDFromTheGraceTokenThenPinned(t *testing.T) {
	withDerivedHW1(t, testNowHW1)
	dir := t.TempDir()
	c := previousClient(t, dir, nil)
	if err := c.store.writeGrace(&cachedGrace{Token: tokenWithHardwareID(testOldHW1), LicenseID: "l", Entitlements: []offline.Entitlement{}}); err != nil {
		t.Fatal(err)
	}
	if got := c.previousHardwareID(quietWrites); got != testOldHW1 {
		t.Fatal(got)
	}
	if r := c.store.readHardwareIDs(); r == nil || r.HardwareID != testHW2 || r.PreviousHardwareID != testOldHW1 {
		t.Fatalf("%+v", r)
	}
	// A new client later: the token is for hw2 now and hw1 derives something else; the record holds.
	c.store.writeGrace(&cachedGrace{Token: tokenWithHardwareID(testHW2), LicenseID: "l", Entitlements: []offline.Entitlement{}})
	withDerivedHW1(t, "hw1-"+strings.Repeat("9", 40))
	if got := previousClient(t, dir, nil).previousHardwareID(quietWrites); got != testOldHW1 {
		t.Fatal(got)
	}
}

func TestPreviousHardwareIDOtherCases(t *testing.T) {
	withDerivedHW1(t, testNowHW1)
	if got := previousClient(t, t.TempDir(), nil).previousHardwareID(quietWrites); got != testNowHW1 {
		t.Fatal("no state: the hw1 derivation", got)
	}
	if got := previousClient(t, t.TempDir(), func(r *resolved) { r.hardwareIDDerived = false }).previousHardwareID(quietWrites); got != "" {
		t.Fatal("an ID the application set has no previous one", got)
	}
	if got := previousClient(t, t.TempDir(), func(r *resolved) { r.hardwareID = testNowHW1 }).previousHardwareID(quietWrites); got != "" {
		t.Fatal("hw1 in use has no previous one", got)
	}
	dir := t.TempDir()
	c := previousClient(t, dir, func(r *resolved) { r.enabled = false })
	if got := c.previousHardwareID(quietWrites); got != testNowHW1 || c.store.has("hardware-id.json") {
		t.Fatal("without offline mode: derived, nothing written", got)
	}
}

func TestFirstBoundTriesTheNextIDOnAMismatchOnly(t *testing.T) {
	tried := []string{}
	got, err := firstBound([]string{"new", "old"}, func(id string) (string, error) {
		tried = append(tried, id)
		if id == "new" {
			return "", &offline.Error{Code: offline.CodeHardwareMismatch, Message: "hardware ID mismatch"}
		}
		return id, nil
	})
	if err != nil || got != "old" || strings.Join(tried, ",") != "new,old" {
		t.Fatal(got, err, tried)
	}
	_, err = firstBound([]string{"new", "old"}, func(id string) (string, error) { return "", errors.New("signature") })
	if err == nil || err.Error() != "signature" {
		t.Fatal(err)
	}
}

// An activation request carries the remembered hw1 ID as previous_hardware_id, so that the
// checkout answering it moves the machine (as the Node client's does).
func TestActivationRequestNamesThePreviousHardwareID(t *testing.T) {
	dir := t.TempDir()
	c := previousClient(t, dir, func(r *resolved) { r.licenseKey = "7KQ2-M9XD-1RTV-4HJP-8WNC-3FGB-6ZSY"; r.version = "1.0.0" })
	c.clock = newFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	if err := c.store.writeHardwareIDs(&hardwareIDRecord{HardwareID: testHW2, PreviousHardwareID: testOldHW1}); err != nil {
		t.Fatal(err)
	}
	made, err := c.CreateActivationRequest(ActivationRequestOptions{MachineName: "bench", ReturnPending: true})
	if err != nil {
		t.Fatal(err)
	}
	if made.Request.HardwareID != testHW2 || made.Request.PreviousHardwareID != testOldHW1 {
		t.Fatalf("%+v", made.Request)
	}
	decoded, err := offline.DecodeActivationRequest([]byte(made.Text))
	if err != nil || decoded.PreviousHardwareID != testOldHW1 {
		t.Fatalf("%+v %v", decoded, err)
	}
}
