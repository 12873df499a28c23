package client

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestValidatesOnline(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	r := c.Validate()
	expectValid(t, r, TierOnline)
	if r.IsOffline || !bytes.Equal(r.DecryptionKey, testDecryptionKey) || r.LicenseID != testLicenseID || len(r.Warnings) != 0 {
		t.Fatalf("%+v", r)
	}
	if !r.HasEntitlement("seats") || !r.HasEntitlement("export") || r.HasEntitlement("other") {
		t.Fatal("entitlements online: export is restricted only while offline")
	}
	info, err := os.Stat(e.stateDir())
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("cache directory %v %v", info, err)
	}
	for _, name := range []string{"grace.json", "clock.json"} {
		info, err := os.Stat(filepath.Join(e.stateDir(), name))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", name, info, err)
		}
	}
	// The files are the Node client's: clock.json holds the server's time in ms.
	var clock map[string]any
	data, _ := os.ReadFile(filepath.Join(e.stateDir(), "clock.json"))
	if err := json.Unmarshal(data, &clock); err != nil || clock["latest"] != float64(testStart.UnixMilli()) || len(clock) != 1 {
		t.Fatalf("clock.json %s", data)
	}
	var grace map[string]any
	data, _ = os.ReadFile(filepath.Join(e.stateDir(), "grace.json"))
	if err := json.Unmarshal(data, &grace); err != nil || grace["license_id"] != testLicenseID || grace["saved_at"] != "2026-11-22T10:00:00.000Z" {
		t.Fatalf("grace.json %s", data)
	}
	if c.IsOffline() || c.HardwareID() != testHardwareID {
		t.Fatal("state")
	}
}

func TestFallsBackToTheLicenseFileEnteringOfflineModeOnce(t *testing.T) {
	e := newEnv(t)
	var entered []time.Duration
	c := e.client(func(cfg *Config) { cfg.OnOfflineModeEnter = func(d time.Duration) { entered = append(entered, d) } })
	expectValid(t, c.Validate(), TierOnline)
	e.server.stop()
	r := c.Validate()
	expectValid(t, r, TierLicenseFile)
	if !r.IsOffline || !bytes.Equal(r.DecryptionKey, testDecryptionKey) || !c.IsOffline() {
		t.Fatalf("%+v", r)
	}
	if !r.HasEntitlement("seats") || r.HasEntitlement("export") {
		t.Fatal("export is restricted while offline")
	}
	if len(r.Failures) != 0 {
		t.Fatal("a valid answer lists no failures")
	}
	c.Validate()
	if len(entered) != 1 || entered[0] != 72*time.Hour {
		t.Fatalf("entered %v", entered)
	}
}

func TestGraceTokenThenGracePeriodExpiredOnce(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	expired := 0
	c := e.client(func(cfg *Config) {
		cfg.Offline.LicenseFile = filepath.Join(e.dir, "missing.lic")
		cfg.OnGracePeriodExpired = func() { mu.Lock(); expired++; mu.Unlock() }
	})
	expectValid(t, c.Validate(), TierOnline)
	e.server.stop()
	r := c.Validate()
	expectValid(t, r, TierGraceToken)
	if !r.IsOffline || !r.HasEntitlement("seats") || r.HasEntitlement("export") || r.DecryptionKey != nil || len(r.Failures) != 0 {
		t.Fatalf("%+v", r)
	}
	// The grace timer runs the chain again at exp; nothing vouches any more.
	e.clock.Advance(73 * time.Hour)
	eventually(t, "the grace period expired", func() bool { mu.Lock(); defer mu.Unlock(); return expired == 1 })
	after := c.Validate()
	if after.Valid {
		t.Fatal("valid after the grace period")
	}
	expectCodes(t, after, "SERVER_UNREACHABLE", "LICENSE_FILE_UNREADABLE", "GRACE_TOKEN_EXPIRED")
	if after.Reason != "GRACE_TOKEN_EXPIRED" || !strings.HasPrefix(after.Failures[1].Message, "cannot read ") || !strings.HasSuffix(after.Failures[1].Message, ": no such file or directory") {
		t.Fatalf("%+v", after.Failures)
	}
	c.Validate()
	mu.Lock()
	defer mu.Unlock()
	if expired != 1 {
		t.Fatalf("fired %d times", expired)
	}
}

func TestRetryBackoffMaxAttemptsAndClose(t *testing.T) {
	e := newEnv(t)
	e.server.stop()
	c := e.client(func(cfg *Config) { cfg.Offline.MaxRetryAttempts = 7 })
	var entered []time.Duration
	c.callbacks.OnOfflineModeEnter = func(d time.Duration) { entered = append(entered, d) }
	expectValid(t, c.Validate(), TierLicenseFile)
	if len(entered) != 1 || entered[0] != 0 {
		t.Fatalf("without a grace token, 0 is left: %v", entered)
	}
	var delays []time.Duration
	for i := 0; i < 10; i++ {
		pending := e.clock.Pending()
		if len(pending) == 0 {
			break
		}
		delays = append(delays, pending[0])
		e.clock.Advance(pending[0])
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	if !reflect.DeepEqual(delays, want) {
		t.Fatalf("delays %v", delays)
	}
	if e.server.validates != 0 {
		t.Fatal("the server was stopped")
	}
	c.Close()
	if len(e.clock.Pending()) != 0 {
		t.Fatal("timers after Close")
	}
	r := c.Validate()
	expectCodes(t, r, "CLIENT_CLOSED")
}

func TestRetryReconnectsAndCloseStopsTimers(t *testing.T) {
	e := newEnv(t)
	exits := 0
	c := e.client(func(cfg *Config) { cfg.OnOfflineModeExit = func() { exits++ } })
	expectValid(t, c.Validate(), TierOnline)
	e.server.stop()
	expectValid(t, c.Validate(), TierLicenseFile)
	e.clock.Advance(30 * time.Second)
	e.clock.Advance(time.Minute)
	if !c.IsOffline() || exits != 0 {
		t.Fatal("still offline")
	}
	e.server.start()
	e.clock.Advance(2 * time.Minute)
	if c.IsOffline() || exits != 1 {
		t.Fatalf("offline=%v exits=%d", c.IsOffline(), exits)
	}
	// Back online: no retry timer; the grace timer is gone too. Unlimited attempts (0).
	if len(e.clock.Pending()) != 0 {
		t.Fatalf("pending %v", e.clock.Pending())
	}
	expectValid(t, c.Validate(), TierOnline)
	e.server.stop()
	c.Validate()
	for i := 0; i < 20; i++ {
		e.clock.Advance(5 * time.Minute)
	}
	if got := e.clock.Pending(); len(got) != 1 || got[0] != 5*time.Minute {
		t.Fatalf("0 attempts retries for ever, at 5 min: %v", got)
	}
	c.Close()
	if len(e.clock.Pending()) != 0 {
		t.Fatal("timers after Close")
	}
}

func TestUsageQueuedOfflineSurvivesRestartFlushedOnce(t *testing.T) {
	e := newEnv(t)
	e.server.stop()
	first := e.client()
	first.Validate()
	reported, err := first.ReportUsage("seats", 3)
	if err != nil || reported.Accepted || !reported.Queued {
		t.Fatalf("%+v %v", reported, err)
	}
	first.Close()
	// A new process: the queue is on disk.
	exits := 0
	second := e.client(func(cfg *Config) { cfg.OnOfflineModeExit = func() { exits++ } })
	if r := second.Validate(); !r.IsOffline {
		t.Fatal("offline")
	}
	if _, err := second.ReportUsage("seats", 2); err != nil {
		t.Fatal(err)
	}
	queueDir := filepath.Join(e.stateDir(), "queue")
	if n := queueLength(t, queueDir); n != 2 {
		t.Fatalf("queue %d", n)
	}
	// Each report is a file the Node client would read.
	entries, _ := os.ReadDir(queueDir)
	data, _ := os.ReadFile(filepath.Join(queueDir, entries[0].Name()))
	var report map[string]any
	if err := json.Unmarshal(data, &report); err != nil || report["entitlement_code"] != "seats" || report["quantity"] != 3.0 ||
		report["occurred_at"] != "2026-11-22T10:00:00.000Z" || len(report["idempotency_key"].(string)) != 36 {
		t.Fatalf("queued %s", data)
	}
	e.server.start()
	e.clock.Advance(30 * time.Second)
	if exits != 1 || second.IsOffline() {
		t.Fatal("back online")
	}
	if n := queueLength(t, queueDir); n != 0 {
		t.Fatalf("queue %d after the flush", n)
	}
	used, records := e.server.usedOf("seats")
	if used != 5 || records != 2 {
		t.Fatalf("used %d in %d records", used, records)
	}
	online, err := second.ReportUsage("seats", 1)
	if err != nil || !online.Accepted || online.Queued || online.Remaining == nil || *online.Remaining != 94 {
		t.Fatalf("%+v %v", online, err)
	}
}

func TestReportSentAgainIsCountedOnce(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	e.server.stop()
	c.Validate()
	if _, err := c.ReportUsage("seats", 4); err != nil {
		t.Fatal(err)
	}
	queueDir := filepath.Join(e.stateDir(), "queue")
	entries, _ := os.ReadDir(queueDir)
	name := entries[0].Name()
	saved, _ := os.ReadFile(filepath.Join(queueDir, name))
	e.server.start()
	if r := c.Validate(); r.IsOffline {
		t.Fatal("online")
	}
	if n := queueLength(t, queueDir); n != 0 {
		t.Fatal("flushed when leaving offline mode")
	}
	// A crash between send and dequeue: the report is sent again, with its key.
	os.WriteFile(filepath.Join(queueDir, name), saved, 0o600)
	c.Validate()
	eventually(t, "flushed again", func() bool { return queueLength(t, queueDir) == 0 })
	c.background.Wait()
	if used, records := e.server.usedOf("seats"); used != 4 || records != 1 {
		t.Fatalf("used %d in %d records", used, records)
	}
}

// A short-lived program starts online with reports queued by an earlier run: Validate
// sends them in the background, and FlushUsageQueue waits until they are counted, so
// that returning from main right after does not cut the flush short.
func TestFlushUsageQueueBeforeExit(t *testing.T) {
	e := newEnv(t)
	e.server.stop()
	earlier := e.client()
	earlier.Validate()
	for _, quantity := range []int64{3, 4} {
		if _, err := earlier.ReportUsage("seats", quantity); err != nil {
			t.Fatal(err)
		}
	}
	if n := earlier.FlushUsageQueue(); n != 2 {
		t.Fatalf("offline: nothing is sent, %d wait", n)
	}
	if used, records := e.server.usedOf("seats"); used != 0 || records != 0 {
		t.Fatalf("sent while offline: used %d in %d records", used, records)
	}
	earlier.Close()

	e.server.start()
	later := e.client()
	expectValid(t, later.Validate(), TierOnline)
	if n := later.FlushUsageQueue(); n != 0 {
		t.Fatalf("%d still wait", n)
	}
	if used, records := e.server.usedOf("seats"); used != 7 || records != 2 {
		t.Fatalf("used %d in %d records", used, records)
	}
	if n := later.FlushUsageQueue(); n != 0 {
		t.Fatal("an empty queue")
	}
	if used, records := e.server.usedOf("seats"); used != 7 || records != 2 {
		t.Fatalf("sent twice: used %d in %d records", used, records)
	}
}

func TestUsageRefusalsAndRejectedReports(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.Validate()
	_, err := c.ReportUsage("seats", 101)
	if e, ok := err.(*Error); !ok || e.Code != "USAGE_LIMIT_EXCEEDED" {
		t.Fatalf("%v", err)
	}
	_, err = c.ReportUsage("nothing", 1)
	if e, ok := err.(*Error); !ok || e.Code != "ENTITLEMENT_NOT_FOUND" {
		t.Fatalf("%v", err)
	}
	// Queued offline, refused when sent: set aside in rejected/.
	e.server.stop()
	c.Validate()
	if _, err := c.ReportUsage("nothing", 1); err != nil {
		t.Fatal(err)
	}
	e.server.start()
	c.Validate()
	if n := queueLength(t, filepath.Join(e.stateDir(), "queue")); n != 0 {
		t.Fatal("queue not empty")
	}
	if n := queueLength(t, filepath.Join(e.stateDir(), "rejected")); n != 1 {
		t.Fatalf("rejected %d", n)
	}
	// Offline reporting off: an unreachable server is an error.
	e.server.stop()
	off := e.client(func(cfg *Config) {
		cfg.Offline.AllowOfflineUsageReporting = false
		cfg.Offline.CacheDir = filepath.Join(e.dir, "c2")
	})
	_, err = off.ReportUsage("seats", 1)
	if e, ok := err.(*Error); !ok || e.Code != "SERVER_UNREACHABLE" {
		t.Fatalf("%v", err)
	}
}

// A report queued offline that the server does not count because the machine holds no
// seat now (SEAT_REQUIRED) stays queued, and is sent once the machine holds one again.
func TestUsageWithoutASeatStaysQueued(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	e.server.stop()
	c.Validate()
	if _, err := c.ReportUsage("seats", 3); err != nil {
		t.Fatal(err)
	}
	e.server.mu.Lock()
	e.server.seatless = true
	e.server.mu.Unlock()
	e.server.start()
	c.Validate()
	queueDir := filepath.Join(e.stateDir(), "queue")
	if n := c.FlushUsageQueue(); n != 1 || queueLength(t, queueDir) != 1 || queueLength(t, filepath.Join(e.stateDir(), "rejected")) != 0 {
		t.Fatalf("SEAT_REQUIRED is not a refusal for good: %d queued", n)
	}
	if _, err := c.ReportUsage("seats", 1); err == nil || err.(*Error).Code != "SEAT_REQUIRED" {
		t.Fatalf("online: %v", err)
	}
	e.server.mu.Lock()
	e.server.seatless = false
	e.server.mu.Unlock()
	expectValid(t, c.Validate(), TierOnline)
	if n := c.FlushUsageQueue(); n != 0 {
		t.Fatalf("%d still wait", n)
	}
	if used, records := e.server.usedOf("seats"); used != 3 || records != 1 {
		t.Fatalf("used %d in %d records", used, records)
	}
}

func TestAuthoritativeInvalidIsFinalAndRemembered(t *testing.T) {
	e := newEnv(t)
	noFile := func(cfg *Config) { cfg.Offline.LicenseFile = filepath.Join(e.dir, "missing.lic") }
	c := e.client()
	expectValid(t, c.Validate(), TierOnline)
	if !e.exists("grace.json") {
		t.Fatal("no grace token cached")
	}
	e.server.set(func(s *fakeServer) { s.active, s.reason = false, "LICENSE_INACTIVE" })
	r := c.Validate()
	if r.Valid || r.IsOffline || r.Reason != "LICENSE_INACTIVE" || r.Failures[0].Message != "the license is not active" {
		t.Fatalf("%+v", r)
	}
	if e.exists("grace.json") || !e.exists("revoked.json") {
		t.Fatal("the grace token is purged and the verdict written")
	}
	e.server.stop()
	offline := c.Validate()
	if offline.Valid {
		t.Fatal("the .lic file does not revive a revoked license")
	}
	expectCodes(t, offline, "SERVER_UNREACHABLE", "LICENSE_REVOKED", "LICENSE_REVOKED")
	if !strings.Contains(offline.Failures[1].Message, "LICENSE_INACTIVE: the license is not active") {
		t.Fatal(offline.Failures[1].Message)
	}
	expectCodes(t, e.client().Validate(), "SERVER_UNREACHABLE", "LICENSE_REVOKED", "LICENSE_REVOKED")
	revoked := filepath.Join(e.stateDir(), "revoked.json")
	saved, _ := os.ReadFile(revoked)
	os.Remove(revoked)
	expectCodes(t, e.client().Validate(), "SERVER_UNREACHABLE", "LICENSE_REVOKED", "LICENSE_REVOKED") // clock.json keeps a copy
	os.WriteFile(revoked, saved, 0o600)
	os.WriteFile(revoked, []byte("{"), 0o600)
	expectCodes(t, e.client().Validate(), "SERVER_UNREACHABLE", "LICENSE_REVOKED", "LICENSE_REVOKED") // damaged fails safe

	e.server.start()
	e.server.set(func(s *fakeServer) { s.active = true })
	expectValid(t, c.Validate(), TierOnline)
	if e.exists("revoked.json") {
		t.Fatal("a valid answer lifts the verdict")
	}
	e.server.stop()
	expectValid(t, e.client().Validate(), TierLicenseFile)
	expectValid(t, e.client(noFile).Validate(), TierGraceToken)

	// MACHINE_LIMIT_EXCEEDED (or any reason) is a verdict like a revocation.
	e.server.start()
	e.server.set(func(s *fakeServer) { s.active, s.reason = false, "MACHINE_LIMIT_EXCEEDED" })
	if r := c.Validate(); r.Reason != "MACHINE_LIMIT_EXCEEDED" {
		t.Fatal(r.Reason)
	}
	e.server.stop()
	expectCodes(t, c.Validate(), "SERVER_UNREACHABLE", "LICENSE_REVOKED", "LICENSE_REVOKED")
}

func TestNotAVerdict5xx429And4xx(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	e.server.set(func(s *fakeServer) { s.mode = `status:503:{"error":{"code":"UNAVAILABLE","message":"maintenance"}}` })
	r := c.Validate()
	expectValid(t, r, TierLicenseFile)
	e.server.set(func(s *fakeServer) { s.mode = `status:429:{"error":{"code":"RATE_LIMITED","message":"slow down"}}` })
	expectValid(t, c.Validate(), TierLicenseFile)
	e.server.set(func(s *fakeServer) {
		s.mode = `status:400:{"error":{"code":"INVALID_INPUT","message":"version must be the application version"}}`
	})
	r = c.Validate()
	if r.Valid || r.Reason != "INVALID_INPUT" || r.Failures[0].Message != "version must be the application version" || r.IsOffline {
		t.Fatalf("a 4xx error is returned as is: %+v", r)
	}
	if c.IsOffline() {
		t.Fatal("a 4xx answer is an answer: the client is back online")
	}
	e.server.set(func(s *fakeServer) { s.mode = `status:404:{}` })
	if r := c.Validate(); r.Reason != "HTTP_404" || r.Failures[0].Message != "the server refused the request (HTTP 404)" {
		t.Fatalf("%+v", r.Failures)
	}
	e.server.stop()
	expectValid(t, e.client().Validate(), TierLicenseFile)
}

func TestGarbageAndHangingServers(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ mode, pattern string }{
		{"garbage", "the server answered something that is not JSON (HTTP 200)"},
		{"hang", "no answer within 300 ms"},
		{`status:200:[1,2]`, "the server answered JSON that is not an object (HTTP 200)"},
		{`status:200:{"valid":true}`, "the server answered JSON of an unexpected shape"},
	} {
		e.server.set(func(s *fakeServer) { s.mode = c.mode })
		started := time.Now()
		r := e.client(func(cfg *Config) { cfg.RequestTimeout = 300 * time.Millisecond }).Validate()
		expectValid(t, r, TierLicenseFile)
		online := e.client(func(cfg *Config) { cfg.RequestTimeout = 300 * time.Millisecond; cfg.Offline = OfflineConfig{} }).Validate()
		if online.Valid || online.IsOffline || online.Failures[0].Message != c.pattern {
			t.Fatalf("%s: %+v", c.mode, online.Failures)
		}
		if time.Since(started) > 3*time.Second {
			t.Fatal("too slow")
		}
	}
	e.server.set(func(s *fakeServer) { s.mode = "" })
	e.server.stop()
	r := e.client(func(cfg *Config) { cfg.Offline = OfflineConfig{} }).Validate()
	if r.Failures[0].Message != "cannot reach the server (ECONNREFUSED)" {
		t.Fatal(r.Failures[0].Message)
	}
}

func TestClockRollback(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	expectValid(t, c.Validate(), TierOnline)
	e.server.stop()
	e.clock.Set(testStart.Add(-24 * time.Hour))
	r := c.Validate()
	if r.Valid {
		t.Fatal("valid with the clock set back a day")
	}
	expectCodes(t, r, "SERVER_UNREACHABLE", "CLOCK_ROLLBACK", "CLOCK_ROLLBACK")
	if want := "the system clock (2026-11-21T10:00:00.000Z) is behind a time already seen (2026-11-22T10:00:00.000Z); it was set back"; r.Failures[1].Message != want {
		t.Fatal(r.Failures[1].Message)
	}
	e.clock.Set(testStart.Add(-time.Minute))
	expectValid(t, c.Validate(), TierLicenseFile) // a minute of drift is tolerated
	e.clock.Set(testStart.Add(-4*time.Minute - 59*time.Second))
	expectValid(t, c.Validate(), TierLicenseFile)
	e.clock.Set(testStart.Add(-5*time.Minute - time.Second))
	expectCodes(t, c.Validate(), "SERVER_UNREACHABLE", "CLOCK_ROLLBACK", "CLOCK_ROLLBACK")
}

func TestFailedOfflineChecksAdvanceTheTrustedTime(t *testing.T) {
	e := newEnv(t)
	missing := func(cfg *Config) { cfg.Offline.LicenseFile = filepath.Join(e.dir, "missing.lic") }
	c := e.client(missing)
	expectValid(t, c.Validate(), TierOnline)
	e.server.stop()
	e.clock.Set(testStart.Add(73 * time.Hour))
	expectCodes(t, c.Validate(), "SERVER_UNREACHABLE", "LICENSE_FILE_UNREADABLE", "GRACE_TOKEN_EXPIRED")
	e.clock.Set(testStart.Add(71 * time.Hour))
	back := c.Validate()
	if back.Valid {
		t.Fatal("the expired grace token came back with the clock set back")
	}
	expectCodes(t, back, "SERVER_UNREACHABLE", "CLOCK_ROLLBACK", "CLOCK_ROLLBACK")
	expectCodes(t, e.client(missing).Validate(), "SERVER_UNREACHABLE", "CLOCK_ROLLBACK", "CLOCK_ROLLBACK") // kept on disk
	// The server's time rewrites it, also downwards.
	e.server.start()
	expectValid(t, c.Validate(), TierOnline)
	e.server.stop()
	expectValid(t, e.client(missing).Validate(), TierGraceToken)
}

func TestUntrustedClockRecord(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	expectValid(t, c.Validate(), TierOnline)
	e.server.stop()
	clockFile := filepath.Join(e.stateDir(), "clock.json")
	for _, damaged := range []string{"not json", `{"latest":"soon"}`, `[]`} {
		os.WriteFile(clockFile, []byte(damaged), 0o600)
		r := e.client().Validate()
		expectCodes(t, r, "SERVER_UNREACHABLE", "CLOCK_UNTRUSTED", "CLOCK_UNTRUSTED")
		if !strings.Contains(r.Failures[1].Message, "cannot be read") {
			t.Fatal(r.Failures[1].Message)
		}
		if data, _ := os.ReadFile(clockFile); string(data) != damaged {
			t.Fatal("an offline check must not overwrite an untrusted record")
		}
	}
	// This process heard the server: its time stands, whatever happened to the file.
	expectValid(t, c.Validate(), TierLicenseFile)
	// A deleted clock.json next to grace.json is suspect; an empty cache is a first run.
	os.Remove(clockFile)
	r := e.client().Validate()
	expectCodes(t, r, "SERVER_UNREACHABLE", "CLOCK_UNTRUSTED", "CLOCK_UNTRUSTED")
	if !strings.Contains(r.Failures[1].Message, "is missing while grace.json is there") {
		t.Fatal(r.Failures[1].Message)
	}
	os.RemoveAll(e.stateDir())
	expectValid(t, e.client().Validate(), TierLicenseFile)
	if !e.exists("clock.json") {
		t.Fatal("the first offline check starts the trusted time")
	}
	// An online answer re-establishes it.
	os.WriteFile(clockFile, []byte("garbage"), 0o600)
	e.server.start()
	fresh := e.client()
	expectValid(t, fresh.Validate(), TierOnline)
	e.server.stop()
	expectValid(t, e.client().Validate(), TierLicenseFile)
}

func TestUnwritableCacheIsAWarning(t *testing.T) {
	e := newEnv(t)
	blocker := filepath.Join(e.dir, "blocker")
	os.WriteFile(blocker, []byte("a regular file where the cache directory should be"), 0o600)
	c := e.client(func(cfg *Config) { cfg.Offline.CacheDir = filepath.Join(blocker, "cache") })
	r := c.Validate()
	expectValid(t, r, TierOnline)
	if len(r.DecryptionKey) != 32 || len(r.Warnings) != 1 || r.Warnings[0].Code != "CACHE_NOT_WRITTEN" ||
		!strings.Contains(r.Warnings[0].Message, "blocker") || !strings.HasSuffix(r.Warnings[0].Message, ": a parent is not a directory") {
		t.Fatalf("%+v", r.Warnings)
	}
	e.server.stop()
	e.clock.Advance(time.Minute) // a later time to record: the offline check tries to write it
	offline := c.Validate()
	expectValid(t, offline, TierLicenseFile)
	if len(offline.Warnings) == 0 || offline.Warnings[0].Code != "CACHE_NOT_WRITTEN" {
		t.Fatal("warnings offline")
	}
	// A verdict that cannot be written is kept in memory.
	e.server.start()
	e.server.set(func(s *fakeServer) { s.active, s.reason = false, "LICENSE_INACTIVE" })
	if r := c.Validate(); r.Reason != "LICENSE_INACTIVE" || r.Warnings[0].Code != "CACHE_NOT_WRITTEN" {
		t.Fatalf("%+v", r)
	}
	e.server.stop()
	expectCodes(t, c.Validate(), "SERVER_UNREACHABLE", "LICENSE_REVOKED", "LICENSE_REVOKED")
	// A report that cannot be queued.
	_, err := c.ReportUsage("seats", 1)
	if e, ok := err.(*Error); !ok || e.Code != "CACHE_NOT_WRITTEN" || !strings.HasPrefix(e.Message, "the report could not be queued: cannot create the cache directory") {
		t.Fatalf("%v", err)
	}
}

func TestBadSituationsEndInAReason(t *testing.T) {
	e := newEnv(t)
	missing := func(cfg *Config) { cfg.Offline.LicenseFile = filepath.Join(e.dir, "missing.lic") }
	expectValid(t, e.client().Validate(), TierOnline)
	graceFile := filepath.Join(e.stateDir(), "grace.json")
	good, _ := os.ReadFile(graceFile)
	e.server.stop()

	// A grace.json that is not JSON counts as absent.
	os.WriteFile(graceFile, []byte(`{"token": "eyJ`), 0o600)
	expectCodes(t, e.client(missing).Validate(), "SERVER_UNREACHABLE", "LICENSE_FILE_UNREADABLE", "NO_GRACE_TOKEN")

	// A grace token with a changed claim.
	var cached map[string]any
	json.Unmarshal(good, &cached)
	parts := strings.Split(cached["token"].(string), ".")
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	changed := strings.Replace(string(claims), `"exp":`, `"exp":1`, 1)
	cached["token"] = parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(changed)) + "." + parts[2]
	tampered, _ := json.Marshal(cached)
	os.WriteFile(graceFile, tampered, 0o600)
	if r := e.client(missing).Validate(); r.Reason != "GRACE_TOKEN_INVALID" {
		t.Fatal(r.Reason)
	}
	os.WriteFile(graceFile, good, 0o600)

	// Only the TEST 1 key: the file (key_id of TEST 2) and the token (kid of TEST 2) name a key it lacks.
	wrongKey := e.client(func(cfg *Config) { cfg.Offline.PublicKey = []byte(e.keys.firstPEM) }).Validate()
	expectCodes(t, wrongKey, "SERVER_UNREACHABLE", "SIGNATURE_INVALID", "GRACE_TOKEN_INVALID")
	if !strings.Contains(wrongKey.Failures[1].Message, "it is signed by key 39f713d0a644253f, which is not in the key set given (key 21fe31dfa154a261)") {
		t.Fatal(wrongKey.Failures[1].Message)
	}

	// A .lic for another license key, and one bound to another machine.
	elsewhere := e.client(func(cfg *Config) {
		cfg.LicenseKey = "ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ"
		cfg.Offline.CacheDir = filepath.Join(e.dir, "c2")
	}).Validate()
	if elsewhere.Failures[1].Code != "LICENSE_FILE_MISMATCH" {
		t.Fatalf("%+v", elsewhere.Failures)
	}
	otherMachine := e.client(func(cfg *Config) { cfg.HardwareID = "other-machine"; cfg.Offline.CacheDir = filepath.Join(e.dir, "c3") }).Validate()
	if otherMachine.Failures[1].Code != "HARDWARE_MISMATCH" || otherMachine.Failures[1].Message != "hardware ID mismatch: failed to decrypt license key" {
		t.Fatalf("%+v", otherMachine.Failures)
	}
	// A grace token for another machine (the cache copied over).
	moved := e.client(func(cfg *Config) { cfg.HardwareID = "other-machine" }, missing).Validate()
	if moved.Reason != "HARDWARE_MISMATCH" {
		t.Fatalf("%+v", moved.Failures)
	}
	// A .lic file that is damaged.
	os.WriteFile(filepath.Join(e.dir, "bad.lic"), []byte("not a license"), 0o600)
	bad := e.client(func(cfg *Config) { cfg.Offline.LicenseFile = filepath.Join(e.dir, "bad.lic") }).Validate()
	expectValid(t, bad, TierGraceToken)
}

func TestOnlineAnswerWithAKeyThatDoesNotOpen(t *testing.T) {
	e := newEnv(t)
	e.server.set(func(s *fakeServer) { s.sealFor = "another-machine" })
	r := e.client().Validate()
	if r.Valid || r.IsOffline {
		t.Fatal("valid")
	}
	expectCodes(t, r, "DECRYPTION_FAILED")
}

func TestKeySets(t *testing.T) {
	e := newEnv(t)
	missing := func(cfg *Config) { cfg.Offline.LicenseFile = filepath.Join(e.dir, "missing.lic") }
	// A client given only the old key does not cache the new key's grace token.
	old := e.client(func(cfg *Config) { cfg.Offline.PublicKey = []byte(e.keys.firstPEM) }, missing)
	expectValid(t, old.Validate(), TierOnline)
	if e.exists("grace.json") {
		t.Fatal("a token the key set cannot verify was cached")
	}
	e.server.stop()
	expectCodes(t, old.Validate(), "SERVER_UNREACHABLE", "LICENSE_FILE_UNREADABLE", "NO_GRACE_TOKEN")

	// The set as separate PEM texts, as raw keys, in either order: files of either key verify.
	e.server.start()
	oldFile := filepath.Join(e.dir, "old.lic")
	writeLicenseFile(t, oldFile, licOptions{key: e.keys.first, hardwareID: testHardwareID,
		validFrom: testStart.Add(-time.Hour), validUntil: testStart.Add(time.Hour * 24), issuedAt: testStart.Add(-time.Hour)})
	firstRaw := []byte(e.keys.first.Public().(ed25519.PublicKey))
	secondRaw := []byte(e.keys.second.Public().(ed25519.PublicKey))
	forms := [][][]byte{
		{e.keys.keySetPEM},
		{[]byte(e.keys.firstPEM), secondRaw},
		{firstRaw, secondRaw},
	}
	for i, parts := range forms {
		for _, file := range []string{e.licFile, oldFile} {
			c := e.client(func(cfg *Config) {
				cfg.Offline.PublicKey = nil
				cfg.Offline.PublicKeys = parts
				cfg.Offline.LicenseFile = file
				cfg.Offline.CacheDir = filepath.Join(e.dir, "sets", string(rune('a'+i)))
			})
			e.server.start()
			expectValid(t, c.Validate(), TierOnline)
			e.server.stop()
			expectValid(t, c.Validate(), TierLicenseFile)
		}
	}
	// A file naming the new key but signed by the old one is refused.
	forged := filepath.Join(e.dir, "forged.lic")
	writeLicenseFile(t, forged, licOptions{key: e.keys.first, keyID: "39f713d0a644253f", hardwareID: testHardwareID,
		validFrom: testStart.Add(-time.Hour), validUntil: testStart.Add(time.Hour * 24), issuedAt: testStart.Add(-time.Hour)})
	r := e.client(func(cfg *Config) {
		cfg.Offline.LicenseFile = forged
		cfg.Offline.CacheDir = filepath.Join(e.dir, "forged")
	}).Validate()
	if r.Failures[1].Code != "SIGNATURE_INVALID" || r.Failures[1].Message != "signature verification failed" {
		t.Fatalf("%+v", r.Failures)
	}
}

func TestReleaseAndLeaseRenewal(t *testing.T) {
	e := newEnv(t)
	e.server.set(func(s *fakeServer) { s.floating = 2 * time.Hour })
	c := e.client()
	expectValid(t, c.Validate(), TierOnline)
	if got := e.clock.Pending(); len(got) != 1 || got[0] != time.Hour {
		t.Fatalf("the lease is renewed halfway: %v", got)
	}
	e.clock.Advance(time.Hour)
	if e.server.validates != 2 {
		t.Fatalf("validations %d", e.server.validates)
	}
	if got := e.clock.Pending(); len(got) != 1 || got[0] != time.Hour {
		t.Fatalf("and again: %v", got)
	}
	released, err := c.Release()
	freeAt := e.clock.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	if err != nil || !released.Released || released.SeatFreeAt != freeAt || released.Message != "the seat is free at "+freeAt+", when the grace token given to this machine ends" {
		t.Fatalf("%+v %v", released, err)
	}
	if e.exists("grace.json") || len(e.clock.Pending()) != 0 {
		t.Fatal("Release deletes the token that was the lease and stops the renewal")
	}
	e.server.stop()
	_, err = c.Release()
	if e, ok := err.(*Error); !ok || e.Code != "SERVER_UNREACHABLE" || !strings.HasSuffix(e.Message, "; the seat is given back when its lease runs out") {
		t.Fatalf("%v", err)
	}
}

func TestCallbacksMayCallTheClient(t *testing.T) {
	e := newEnv(t)
	var c *Client
	calls := 0
	c = e.client(func(cfg *Config) {
		cfg.OnOfflineModeEnter = func(time.Duration) {
			calls++
			if calls == 1 {
				c.Validate() // no deadlock: callbacks run after the client's lock is released
			}
		}
		cfg.OnGracePeriodExpired = func() { c.Close() }
	})
	e.server.stop()
	expectValid(t, c.Validate(), TierLicenseFile)
	if calls != 1 {
		t.Fatal(calls)
	}
}

func TestConcurrentUse(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%2 == 0 {
				if r := c.Validate(); !r.Valid {
					t.Error(r.Failures)
				}
			} else if _, err := c.ReportUsage("seats", 1); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if used, _ := e.server.usedOf("seats"); used != 4 {
		t.Fatal(used)
	}
}
