package client_test

import (
	"fmt"
	"log"
	"os"
	"time"

	client "licenseserver.example/client"
	"licenseserver.example/client/offline"
)

// The application's start: validate, use the entitlements and the decryption key, report
// usage. Compiled by go test (not run: it needs a server and a .lic file).
func Example() {
	keySet, err := os.ReadFile("/etc/myapp/key-set.pem") // signing-key show --all; or embed it
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New(client.Config{
		ServerAddr: "licenses.example.com:8080",
		HTTPS:      true,
		LicenseKey: os.Getenv("LICENSE_KEY"),
		Version:    "2.1.0",
		Offline: client.OfflineConfig{
			Enabled:                    true,
			LicenseFile:                "/etc/myapp/license.lic",
			PublicKey:                  keySet,
			RestrictedEntitlements:     []string{"export"},
			AllowOfflineUsageReporting: true,
		},
		OnOfflineModeEnter: func(remaining time.Duration) {
			log.Printf("license server unreachable; %.1f h of grace left", remaining.Hours())
		},
		OnOfflineModeExit:    func() { log.Print("license server reachable again") },
		OnGracePeriodExpired: func() { log.Print("grace period over; shutting down") },
	})
	if err != nil {
		log.Fatal(err) // *client.ConfigError
	}
	defer c.Close()

	result := c.Validate()
	if !result.Valid {
		log.Fatalf("license not valid: %s (%v)", result.Reason, result.Failures)
	}
	if result.HasEntitlement("export") {
		fmt.Println("export enabled")
	}
	if result.DecryptionKey != nil {
		fmt.Printf("unlock the assets with %d key bytes\n", len(result.DecryptionKey))
	}
	if usage, err := c.ReportUsage("seats", 1); err != nil {
		log.Print(err) // *client.Error: USAGE_LIMIT_EXCEEDED, SERVER_UNREACHABLE, ...
	} else if usage.Queued {
		log.Print("usage queued until the server is back")
	}
}

// Checking a .lic file by hand, as `license-server license verify` does.
func ExampleNew_verifyOnly() {
	keys, err := offline.ParseKeySet([]byte(os.Getenv("LICENSE_PUBLIC_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	file, _ := os.ReadFile("license.lic")
	verified, err := offline.VerifyLicenseFile(file, offline.VerifyOptions{Keys: keys, HardwareID: "demo-machine"})
	if err != nil {
		log.Fatalf("%s: %v", offline.CodeOf(err), err) // e.g. SIGNATURE_INVALID: signature verification failed
	}
	fmt.Println(verified.Payload.CustomerName, verified.Payload.ValidUntil)
}
