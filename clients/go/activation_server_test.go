package client

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"licenseserver.example/client/offline"
)

// TestActivationAgainstServer is run by test/clients/go-activation.test.ts on each engine:
// the air-gapped round trip by request file with the Go client and the real command line
// (AR_NODE runs AR_CLI, license-server's bin/run.js, against AR_DATABASE_URL), and
// InstallLicenseFile refusing a file for another machine and for an older request.
// AR_LICENSE_KEY and AR_LICENSE_ID name a license with a decryption key and room for three
// machines, AR_PUBLIC_KEY is the server's PEM, AR_WORK a directory. Skipped without them.
func TestActivationAgainstServer(t *testing.T) {
	work := os.Getenv("AR_WORK")
	if work == "" {
		t.Skip("run by test/clients/go-activation.test.ts against a real store")
	}
	machine := func(hardwareID string) *Client {
		t.Helper()
		c, err := New(Config{
			LicenseKey: os.Getenv("AR_LICENSE_KEY"), Version: "4.2.0", HardwareID: hardwareID,
			Offline: OfflineConfig{
				Enabled: true, CacheDir: filepath.Join(work, "cache-"+hardwareID), LicenseFile: filepath.Join(work, hardwareID+".lic"),
				PublicKey: []byte(os.Getenv("AR_PUBLIC_KEY")),
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	checkout := func(text, name string) []byte {
		t.Helper()
		dir := filepath.Join(work, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		request := filepath.Join(dir, "request.txt")
		if err := os.WriteFile(request, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Getenv("AR_NODE"), os.Getenv("AR_CLI"), "license", "checkout", os.Getenv("AR_LICENSE_KEY"), "--ttl-days", "30", "--request", request, "--out", dir)
		cmd.Env = append(os.Environ(), "LICENSE_DATABASE_URL="+os.Getenv("AR_DATABASE_URL"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("license checkout --request: %v\n%s", err, out)
		}
		entries, _ := filepath.Glob(filepath.Join(dir, "*.lic"))
		if len(entries) != 1 {
			t.Fatalf("files %v", entries)
		}
		data, err := os.ReadFile(entries[0])
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	wrongRequest := func(err error, part string) {
		t.Helper()
		e, ok := err.(*Error)
		if !ok || e.Code != "LICENSE_FILE_WRONG_REQUEST" || !strings.Contains(e.Message, part) {
			t.Fatalf("want LICENSE_FILE_WRONG_REQUEST with %q, got %v", part, err)
		}
	}

	t.Run("request, checkout --request, install, validate offline", func(t *testing.T) {
		c := machine("go-bench")
		defer c.Close()
		made, err := c.CreateActivationRequest(ActivationRequestOptions{MachineName: "go bench"})
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := offline.DecodeActivationRequest([]byte(made.Text))
		if err != nil || *decoded != *made.Request || decoded.HardwareID != "go-bench" {
			t.Fatalf("request %+v %v", decoded, err)
		}
		info, err := os.Stat(filepath.Join(c.CacheDir(), "pending-request.json"))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("pending request %v %v", info, err)
		}
		file := checkout(made.Text, "usb-go-bench")
		installed, err := c.InstallLicenseFile(file, nil)
		if err != nil {
			t.Fatal(err)
		}
		if installed.RequestNonce != made.Request.Nonce || installed.LicenseID != os.Getenv("AR_LICENSE_ID") || installed.HardwareID != "go-bench" {
			t.Fatalf("installed %+v", installed)
		}
		if _, err := os.Stat(filepath.Join(c.CacheDir(), "pending-request.json")); !os.IsNotExist(err) {
			t.Fatal("the pending request is still there")
		}
		if info, err := os.Stat(filepath.Join(c.CacheDir(), "machine-key.json")); err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("machine key %v %v", info, err)
		}
		// The same file again installs (a second copy of it).
		if _, err := c.InstallLicenseFile(file, nil); err != nil {
			t.Fatal(err)
		}
		r := c.Validate()
		if !r.Valid || r.Source != TierLicenseFile || len(r.DecryptionKey) != 32 || r.LicenseID != os.Getenv("AR_LICENSE_ID") {
			t.Fatalf("validate %+v", r)
		}
	})

	t.Run("install refuses a file for another machine and one for an older request", func(t *testing.T) {
		lab, other := machine("go-lab"), machine("go-other")
		defer lab.Close()
		defer other.Close()
		older, err := lab.CreateActivationRequest(ActivationRequestOptions{})
		if err != nil {
			t.Fatal(err)
		}
		newer, err := lab.CreateActivationRequest(ActivationRequestOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.CreateActivationRequest(ActivationRequestOptions{}); err != nil {
			t.Fatal(err)
		}
		olderFile := checkout(older.Text, "usb-go-older")
		_, err = other.InstallLicenseFile(olderFile, nil)
		wrongRequest(err, `the license file is for another machine: it is bound to hardware ID "go-lab", this machine's is "go-other"`)
		_, err = lab.InstallLicenseFile(olderFile, nil)
		wrongRequest(err, "the license file answers an older request of this machine ("+older.Request.Nonce+", made at "+older.Request.CreatedAt+"), replaced since: this machine's pending request is "+newer.Request.Nonce)
		for _, name := range []string{"go-lab.lic", "go-other.lic"} {
			if _, err := os.Stat(filepath.Join(work, name)); !os.IsNotExist(err) {
				t.Fatalf("%s was put in place", name)
			}
		}
		if _, err := lab.InstallLicenseFile(checkout(newer.Text, "usb-go-newer"), nil); err != nil {
			t.Fatal(err)
		}
		if r := lab.Validate(); !r.Valid {
			t.Fatalf("validate %+v", r.Failures)
		}
	})

	t.Run("the pending request kept by the application (ReturnPending)", func(t *testing.T) {
		c := machine("go-app")
		defer c.Close()
		made, err := c.CreateActivationRequest(ActivationRequestOptions{ReturnPending: true})
		if err != nil || made.Pending == nil || made.Pending.Nonce != made.Request.Nonce {
			t.Fatalf("%+v %v", made, err)
		}
		if _, err := os.Stat(filepath.Join(c.CacheDir(), "pending-request.json")); !os.IsNotExist(err) {
			t.Fatal("ReturnPending wrote the pending request")
		}
		file := checkout(made.Text, "usb-go-app")
		_, err = c.InstallLicenseFile(file, nil)
		wrongRequest(err, "no activation request is pending on this machine")
		if _, err := c.InstallLicenseFile(file, made.Pending); err != nil {
			t.Fatal(err)
		}
	})
}
