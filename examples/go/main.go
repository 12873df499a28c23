// Command check-license is an application's license check, as docs/client.md describes it
// for Go: online first, then the .lic file, then the cached grace token; then one usage
// report. It is examples/check-license.mjs in Go and prints the same lines, so that
// test/clients/go-integration.test.ts can read them.
//
//	LICENSE_SERVER=127.0.0.1:8080 LICENSE_KEY=XXXX-... PUBLIC_KEY_FILE=signing-key.pem \
//	LICENSE_FILE=license.lic USAGE_CODE=seats go run .
//
// HARDWARE_ID overrides the derived hardware ID; CACHE_DIR the cache directory.
package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	client "licenseserver.example/client"
)

func main() { os.Exit(run()) }

func run() int {
	publicKey, err := os.ReadFile(env("PUBLIC_KEY_FILE", ""))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 66
	}
	c, err := client.New(client.Config{
		ServerAddr: env("LICENSE_SERVER", "127.0.0.1:8080"),
		LicenseKey: env("LICENSE_KEY", ""),
		Version:    "1.0.0",
		HardwareID: os.Getenv("HARDWARE_ID"), // "": derived from this machine
		Offline: client.OfflineConfig{
			Enabled:                    true,
			LicenseFile:                env("LICENSE_FILE", ""),
			PublicKey:                  publicKey,
			CacheDir:                   os.Getenv("CACHE_DIR"), // "": the OS configuration directory
			RestrictedEntitlements:     []string{"export"},
			AllowOfflineUsageReporting: true,
		},
		OnOfflineModeEnter: func(remaining time.Duration) {
			fmt.Printf("offline mode: %.1f h of grace left\n", remaining.Hours())
		},
		OnOfflineModeExit:    func() { fmt.Println("back online") },
		OnGracePeriodExpired: func() { fmt.Println("grace period over: the application should shut down") },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // *client.ConfigError
		return 78
	}
	defer c.Close()

	fmt.Printf("hardware ID: %s\n", c.HardwareID())
	result := c.Validate()
	if !result.Valid {
		failures := make([]string, len(result.Failures))
		for i, f := range result.Failures {
			failures[i] = fmt.Sprintf("%s: %s (%s)", f.Tier, f.Code, f.Message)
		}
		fmt.Printf("license not valid: %s\n", strings.Join(failures, "; "))
		return 1
	}
	if result.IsOffline {
		fmt.Printf("license valid (offline, from the %s)\n", result.Source)
	} else {
		fmt.Println("license valid (online)")
	}
	fmt.Printf("entitlements: %s\n", entitlements(result))
	if result.DecryptionKey != nil {
		// A fingerprint, never the key: enough to tell which key was unsealed.
		fmt.Printf("decryption key: available (%d bytes, SHA-256 %x)\n", len(result.DecryptionKey), sha256.Sum256(result.DecryptionKey))
	} else {
		fmt.Println("decryption key: none")
	}

	if code := os.Getenv("USAGE_CODE"); code != "" {
		usage, err := c.ReportUsage(code, 1)
		var refused *client.Error
		switch {
		case errors.As(err, &refused):
			fmt.Printf("usage refused: %s (%s)\n", refused.Code, refused.Message)
			return 1
		case err != nil:
			fmt.Printf("usage refused: %s\n", err)
			return 1
		case usage.Queued:
			fmt.Println("usage queued until the server is back")
		case usage.Remaining == nil:
			fmt.Println("usage counted, no limit left")
		default:
			fmt.Printf("usage counted, %d left\n", *usage.Remaining)
		}
	}
	// Online, the client sends what was queued while offline in the background; a program
	// about to exit waits for that, or the reports stay queued until its next run.
	fmt.Printf("usage queue: %d waiting\n", c.FlushUsageQueue())
	return 0
}

// env is the variable's value, the fallback when it is unset; without either the program
// cannot run, and says which variable to set.
func env(name, fallback string) string {
	if value, ok := os.LookupEnv(name); ok {
		return value
	}
	if fallback == "" {
		fmt.Fprintf(os.Stderr, "set %s\n", name)
		os.Exit(64)
	}
	return fallback
}

// entitlements lists the codes, marking those HasEntitlement refuses while offline.
func entitlements(result *client.Result) string {
	if len(result.Entitlements) == 0 {
		return "none"
	}
	codes := make([]string, len(result.Entitlements))
	for i, e := range result.Entitlements {
		codes[i] = e.Code
		if !result.HasEntitlement(e.Code) {
			codes[i] += " (restricted offline)"
		}
	}
	return strings.Join(codes, ", ")
}
