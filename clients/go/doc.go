// Package client is the Go license client of the license server (spec sections 1,
// 2.5-2.7, 5 and 6; issue 14, part 3). It mirrors the Node client (docs/client.md):
//
//	c, err := client.New(client.Config{
//		ServerAddr: "licenses.example.com:8080",
//		HTTPS:      true,
//		LicenseKey: "7KQ2-M9XD-1RTV-...",
//		Version:    "2.1.0",
//		Offline: client.OfflineConfig{
//			Enabled:                    true,
//			LicenseFile:                "/etc/myapp/license.lic",
//			PublicKey:                  keySetPEM, // signing-key show --all; or embed it at build time
//			RestrictedEntitlements:     []string{"export"},
//			AllowOfflineUsageReporting: true,
//		},
//		OnOfflineModeEnter:   func(remaining time.Duration) { log.Printf("offline; %s of grace left", remaining) },
//		OnOfflineModeExit:    func() { log.Print("license server reachable again") },
//		OnGracePeriodExpired: func() { app.ShutdownGracefully() },
//	})
//	if err != nil { ... } // *client.ConfigError
//	defer c.Close()
//	result := c.Validate()
//	if !result.Valid { return fmt.Errorf("license not valid: %s", result.Reason) }
//	if result.HasEntitlement("export") { enableExport() }
//	usage, err := c.ReportUsage("seats", 1)
//
// Validate walks the chain online, then the .lic file, then the cached grace token;
// only an unreachable server (no connection, a timeout, a 5xx, a 429, an answer that is
// not the API's JSON) moves down the chain, and the server's "not valid" is final and
// remembered. The offline verification itself is package offline; the derived hardware
// ID is package hardwareid.
package client
