package client

// The "bad input" list, against the client as an application uses it. Covered
// elsewhere: a .lic for another machine and one naming a key id the set lacks
// (TestBadSituationsEndInAReason), a clock set back (TestClockRollback,
// TestFailedOfflineChecksAdvanceTheTrustedTime), and an HTML page with status 200
// (TestGarbageAndHangingServers).

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	day  = 24 * time.Hour
	year = 365 * day
)

// ---- .lic files ----

func TestLicenseFileSignedByAKeyNotInTheSet(t *testing.T) {
	e := newEnv(t)
	e.server.stop()
	seed := sha256.Sum256([]byte("another vendor's signing key"))
	window := licOptions{hardwareID: testHardwareID, validFrom: testStart.Add(-day), validUntil: testStart.Add(30 * day), issuedAt: testStart.Add(-time.Hour)}
	for _, c := range []struct {
		name string
		key  ed25519.PrivateKey
		want []string
	}{
		// Without key_id the file is tried against every key of the set, and none fits.
		{"another vendor", ed25519.NewKeyFromSeed(seed[:]), []string{"SERVER_UNREACHABLE", "SIGNATURE_INVALID", "NO_GRACE_TOKEN"}},
		// The same file signed by a key of the set verifies: the refusal above is the key's.
		{"a key of the set", e.keys.first, nil},
	} {
		file := filepath.Join(e.dir, strings.ReplaceAll(c.name, " ", "-")+".lic")
		options := window
		options.key = c.key
		writeLicenseFile(t, file, options)
		r := e.client(func(cfg *Config) {
			cfg.Offline.LicenseFile = file
			cfg.Offline.CacheDir = filepath.Join(e.dir, "cache-"+filepath.Base(file))
		}).Validate()
		if c.want == nil {
			expectValid(t, r, TierLicenseFile)
			continue
		}
		expectCodes(t, r, c.want...)
		if r.Failures[1].Message != "signature verification failed" {
			t.Fatalf("%s: %q", c.name, r.Failures[1].Message)
		}
	}
}

func TestLicenseFileTamperedTruncatedOrNotBase64(t *testing.T) {
	e := newEnv(t)
	e.server.stop()
	good, err := os.ReadFile(e.licFile)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.TrimSuffix(string(good), "\n")
	document, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		t.Fatal(err)
	}
	// changed re-encodes the document with one value replaced, as an editor would.
	changed := func(old, replacement string) string {
		if !bytes.Contains(document, []byte(old)) {
			t.Fatalf("the file holds no %s", old)
		}
		return base64.StdEncoding.EncodeToString(bytes.Replace(document, []byte(old), []byte(replacement), 1)) + "\n"
	}
	half := len(text) / 2
	for _, c := range []struct {
		name, content, code, message string
	}{
		{"a seat limit raised", changed(`"usage_limit":100`, `"usage_limit":1000`), "SIGNATURE_INVALID", "signature verification failed"},
		{"the window extended", changed(`"valid_until":"2026-12-22T10:00:00Z"`, `"valid_until":"2036-12-22T10:00:00Z"`), "SIGNATURE_INVALID", "signature verification failed"},
		{"truncated mid-symbol", text[:half|1] + "\n", "LICENSE_FILE_MALFORMED", "license file is malformed: it is not valid Base64 (it may be truncated)"},
		{"truncated on a Base64 block", text[:half&^3] + "\n", "LICENSE_FILE_MALFORMED", "license file is malformed: the decoded content is not JSON (it may be truncated)"},
		{"truncated to nothing", "", "LICENSE_FILE_MALFORMED", "license file is malformed: it is empty"},
		{"the decoded JSON saved as it is", string(document), "LICENSE_FILE_MALFORMED", "license file is malformed: it holds bytes that are not ASCII"},
		{"Base64url without padding", base64.RawURLEncoding.EncodeToString(document), "LICENSE_FILE_MALFORMED", "license file is malformed: it is not valid Base64 (it may be truncated)"},
		{"plain text", "this is not a license\n", "LICENSE_FILE_MALFORMED", "license file is malformed: it is not valid Base64 (it may be truncated)"},
	} {
		file := filepath.Join(e.dir, strings.ReplaceAll(c.name, " ", "-")+".lic")
		if err := os.WriteFile(file, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		r := e.client(func(cfg *Config) {
			cfg.Offline.LicenseFile = file
			cfg.Offline.CacheDir = filepath.Join(e.dir, "cache-"+filepath.Base(file))
		}).Validate()
		if r.Valid {
			t.Fatalf("%s: valid", c.name)
		}
		expectCodes(t, r, "SERVER_UNREACHABLE", c.code, "NO_GRACE_TOKEN")
		if r.Failures[1].Message != c.message {
			t.Fatalf("%s: %q", c.name, r.Failures[1].Message)
		}
	}
	// The untouched file answers: each refusal above is the change's.
	expectValid(t, e.client(func(cfg *Config) { cfg.Offline.CacheDir = filepath.Join(e.dir, "cache-good") }).Validate(), TierLicenseFile)
}

// ---- a cache directory on a read-only or full file system ----

// mountTmpfs mounts a tmpfs with options on dir until the test ends. It needs root, as CI
// has: under CI a machine that cannot mount fails the test, elsewhere it skips it.
func mountTmpfs(t *testing.T, dir, options string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot mount a small file system for this test: %v %s", err, out)
		}
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
}

func remountReadOnly(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s read-only: %v %s", dir, err, out)
	}
}

// fillToTheBrim writes a file on dir's file system until it is out of space.
func fillToTheBrim(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil || fs.Bavail != 0 {
		t.Fatalf("the file system is not full: %d blocks free (%v)", fs.Bavail, err)
	}
}

func expectWarnings(t *testing.T, r *Result, messages ...string) {
	t.Helper()
	var got []string
	for _, w := range r.Warnings {
		if w.Code != "CACHE_NOT_WRITTEN" {
			t.Fatalf("warning %+v", w)
		}
		got = append(got, w.Message)
	}
	if strings.Join(got, "\n") != strings.Join(messages, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(messages, "\n"))
	}
}

func TestReadOnlyCacheKeepsTheVerdictInMemory(t *testing.T) {
	e := newEnv(t)
	mountTmpfs(t, e.cacheDir, "size=1m,mode=0700")
	c := e.client()
	expectValid(t, c.Validate(), TierOnline)
	remountReadOnly(t, e.cacheDir)

	e.server.set(func(s *fakeServer) { s.active, s.reason = false, "LICENSE_INACTIVE" })
	revoked := c.Validate()
	if revoked.Valid || revoked.Reason != "LICENSE_INACTIVE" {
		t.Fatalf("%+v", revoked)
	}
	state := e.stateDir()
	expectWarnings(t, revoked,
		"cannot write "+state+"/clock.json: read-only file system",
		"cannot write "+state+"/revoked.json: read-only file system",
		"cannot remove "+state+"/grace.json: read-only file system")
	if !e.exists("grace.json") || e.exists("revoked.json") {
		t.Fatal("the read-only disk still holds the grace token and no verdict")
	}

	e.server.stop()
	e.clock.Advance(time.Minute) // a later time to record: the offline check tries to write it
	offline := c.Validate()
	expectCodes(t, offline, "SERVER_UNREACHABLE", "LICENSE_REVOKED", "LICENSE_REVOKED")
	if !strings.Contains(offline.Failures[1].Message, "(LICENSE_INACTIVE: the license is not active)") {
		t.Fatal(offline.Failures[1].Message)
	}
	expectWarnings(t, offline, "cannot write "+state+"/clock.json: read-only file system")
}

func TestReadOnlyCacheFromTheStart(t *testing.T) {
	e := newEnv(t)
	mountTmpfs(t, e.cacheDir, "ro,size=1m,mode=0700")
	c := e.client()
	cannotCreate := "cannot create the cache directory " + e.stateDir() + ": read-only file system"
	online := c.Validate()
	expectValid(t, online, TierOnline)
	if len(online.DecryptionKey) != 32 {
		t.Fatal("the decryption key")
	}
	expectWarnings(t, online, cannotCreate)

	e.server.stop()
	// The server's time is kept in memory: a day back is a rollback.
	e.clock.Set(testStart.Add(-day))
	expectCodes(t, c.Validate(), "SERVER_UNREACHABLE", "CLOCK_ROLLBACK", "CLOCK_ROLLBACK")
	e.clock.Set(testStart.Add(time.Minute))
	offline := c.Validate()
	expectValid(t, offline, TierLicenseFile)
	expectWarnings(t, offline, cannotCreate)
}

func TestFullDiskCache(t *testing.T) {
	e := newEnv(t)
	mountTmpfs(t, e.cacheDir, "size=256k,mode=0700")
	c := e.client()
	expectValid(t, c.Validate(), TierOnline)
	clockFile := filepath.Join(e.stateDir(), "clock.json")
	before, _ := os.ReadFile(clockFile)
	fillToTheBrim(t, e.cacheDir)

	e.clock.Advance(time.Hour)
	online := c.Validate()
	expectValid(t, online, TierOnline)
	if len(online.DecryptionKey) != 32 {
		t.Fatal("the decryption key")
	}
	noSpace := "cannot write " + clockFile + ": no space left on the device"
	expectWarnings(t, online, noSpace)
	// Written whole or not at all: the old file stands, nothing partial is left.
	if after, _ := os.ReadFile(clockFile); !bytes.Equal(after, before) || !strings.Contains(string(after), fmt.Sprint(testStart.UnixMilli())) {
		t.Fatalf("clock.json %s, was %s", after, before)
	}
	if partial, _ := filepath.Glob(filepath.Join(e.stateDir(), "*.partial")); len(partial) != 0 {
		t.Fatalf("left behind: %v", partial)
	}

	e.server.stop()
	// Half an hour after the disk's time but half an hour before the server's last answer,
	// which only this process knows: a rollback.
	e.clock.Set(testStart.Add(30 * time.Minute))
	expectCodes(t, c.Validate(), "SERVER_UNREACHABLE", "CLOCK_ROLLBACK", "CLOCK_ROLLBACK")
	e.clock.Set(testStart.Add(2 * time.Hour))
	offline := c.Validate()
	expectValid(t, offline, TierLicenseFile)
	expectWarnings(t, offline, noSpace)
}

func TestFullDiskFromTheStart(t *testing.T) {
	e := newEnv(t)
	mountTmpfs(t, e.cacheDir, "size=64k,nr_inodes=2,mode=0700")
	fillToTheBrim(t, e.cacheDir)
	var fs syscall.Statfs_t
	if err := syscall.Statfs(e.cacheDir, &fs); err != nil || fs.Ffree != 0 {
		t.Fatalf("%d inodes free (%v)", fs.Ffree, err)
	}
	noSpace := "cannot create the cache directory " + e.stateDir() + ": no space left on the device"
	c := e.client()
	online := c.Validate()
	expectValid(t, online, TierOnline)
	expectWarnings(t, online, noSpace)

	e.server.stop()
	e.clock.Advance(time.Minute)
	offline := c.Validate()
	expectValid(t, offline, TierLicenseFile)
	expectWarnings(t, offline, noSpace)
	_, err := c.ReportUsage("seats", 1)
	want := "the report could not be queued: cannot create the cache directory " + e.stateDir() + "/queue: no space left on the device"
	if e, ok := err.(*Error); !ok || e.Code != "CACHE_NOT_WRITTEN" || e.Message != want {
		t.Fatalf("%v", err)
	}
}

// ---- timers of a year and more ----

// front is an HTTP server in front of the fake server that counts requests and, while
// answer is set, answers by it instead.
type front struct {
	mu       sync.Mutex
	requests int
	answer   http.HandlerFunc
	addr     string
}

func newFront(t *testing.T, e *env) *front {
	f := &front{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests++
		answer := f.answer
		f.mu.Unlock()
		if answer == nil {
			answer = e.server.handle
		}
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	f.addr = srv.Listener.Addr().String()
	return f
}

func (f *front) set(answer http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = answer
}

func (f *front) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func unavailable(w http.ResponseWriter, _ *http.Request) {
	apiError(w, 503, "UNAVAILABLE", "down for maintenance")
}

func TestYearLongGraceTokenExpiresAtItsEndOnTheFakeClock(t *testing.T) {
	e := newEnv(t)
	e.server.set(func(s *fakeServer) { s.grace = 8760 * time.Hour })
	f := newFront(t, e)
	var entered []time.Duration
	expired := 0
	c := e.client(func(cfg *Config) {
		cfg.ServerAddr = f.addr
		cfg.Offline.LicenseFile = filepath.Join(e.dir, "missing.lic")
		// The first retry would come after the token's end: the expiry is the timer that matters.
		cfg.Offline.RetryInterval, cfg.Offline.MaxRetryInterval = 400*day, 400*day
		cfg.OnOfflineModeEnter = func(d time.Duration) { entered = append(entered, d) }
		cfg.OnGracePeriodExpired = func() { expired++ }
	})
	expectValid(t, c.Validate(), TierOnline)
	f.set(unavailable)
	expectValid(t, c.Validate(), TierGraceToken)
	if len(entered) != 1 || entered[0] != 8760*time.Hour {
		t.Fatalf("remaining grace %v", entered)
	}
	if got := e.clock.Pending(); len(got) != 2 || got[0] != 8760*time.Hour || got[1] != 400*day {
		t.Fatalf("timers %v", got)
	}
	e.clock.Advance(8760*time.Hour - time.Second)
	if expired != 0 || f.count() != 2 {
		t.Fatalf("a second before exp: expired %d, requests %d", expired, f.count())
	}
	e.clock.Advance(time.Second)
	if expired != 1 || f.count() != 3 {
		t.Fatalf("at exp the chain runs once more and the grace period is over: expired %d, requests %d", expired, f.count())
	}
}

func TestGraceTokensOfAYearAndOfCenturiesOnTheSystemClock(t *testing.T) {
	for _, grace := range []time.Duration{8760 * time.Hour, 290 * year} {
		e := newEnv(t)
		e.clock.Set(time.Now()) // the server signs tokens that hold now
		e.server.set(func(s *fakeServer) { s.grace = grace })
		f := newFront(t, e)
		var mu sync.Mutex
		var entered []time.Duration
		expired := 0
		c := e.client(func(cfg *Config) {
			cfg.Clock = SystemClock
			cfg.ServerAddr = f.addr
			cfg.Offline.LicenseFile = filepath.Join(e.dir, "missing.lic")
			cfg.OnOfflineModeEnter = func(d time.Duration) { mu.Lock(); entered = append(entered, d); mu.Unlock() }
			cfg.OnGracePeriodExpired = func() { mu.Lock(); expired++; mu.Unlock() }
		})
		expectValid(t, c.Validate(), TierOnline)
		f.set(unavailable)
		expectValid(t, c.Validate(), TierGraceToken)
		// Real time in which a timer that overflowed into "now" would have fired many times.
		time.Sleep(time.Second)
		mu.Lock()
		if len(entered) != 1 || entered[0] < grace-time.Minute || entered[0] > grace || expired != 0 || f.count() != 2 {
			t.Fatalf("grace %v: entered %v, expired %d, requests %d", grace, entered, expired, f.count())
		}
		mu.Unlock()
	}
}

func TestRetryIntervalsBeyond2To31MillisecondsAndBeyondTheDurationRange(t *testing.T) {
	e := newEnv(t)
	f := newFront(t, e)
	f.set(unavailable)
	base := 1 // the validation that goes offline
	retries := func() int { return f.count() - base }
	c := e.client(func(cfg *Config) {
		cfg.ServerAddr = f.addr
		cfg.Offline.RetryInterval, cfg.Offline.MaxRetryInterval = 30*day, 90*day
	})
	expectValid(t, c.Validate(), TierLicenseFile)
	e.clock.Advance(30*day - time.Second)
	if retries() != 0 {
		t.Fatal("retried before 30 days")
	}
	e.clock.Advance(time.Second)
	if retries() != 1 || !durationsEqual(e.clock.Pending(), 60*day) {
		t.Fatalf("retries %d, then %v", retries(), e.clock.Pending())
	}
	e.clock.Advance(60 * day)
	if retries() != 2 || !durationsEqual(e.clock.Pending(), 90*day) {
		t.Fatalf("retries %d, then %v", retries(), e.clock.Pending())
	}
	c.Close()

	// Doubling 150 years passes the end of time.Duration (292 years): the cap holds instead.
	base = f.count() + 1
	const forever = time.Duration(math.MaxInt64)
	c = e.client(func(cfg *Config) {
		cfg.ServerAddr = f.addr
		cfg.Offline.CacheDir = filepath.Join(e.dir, "centuries")
		cfg.Offline.RetryInterval, cfg.Offline.MaxRetryInterval = 150*year, forever
	})
	if r := c.Validate(); !r.IsOffline {
		t.Fatalf("%+v", r)
	}
	e.clock.Advance(150 * year)
	if retries() != 1 || !durationsEqual(e.clock.Pending(), forever) {
		t.Fatalf("retries %d, then %v", retries(), e.clock.Pending())
	}
}

func durationsEqual(got []time.Duration, want ...time.Duration) bool {
	return fmt.Sprint(got) == fmt.Sprint(want)
}

// ---- answers that are not the API's ----

// maxAnswerBytes is the cap the client puts on an answer; spelled out here so a change of
// transport.go's constant has to change the test too.
const maxAnswerBytes = 1 << 20

func TestServerAnswersThatAreNotTheAPIs(t *testing.T) {
	e := newEnv(t)
	f := newFront(t, e)
	// genuine is the fake server's own valid answer, padded in front with whitespace (which
	// JSON allows) to size bytes.
	genuine := func(size int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			recorded := httptest.NewRecorder()
			e.server.handle(recorded, r)
			body := recorded.Body.Bytes()
			w.Header().Set("Content-Type", "application/json")
			w.Write(append(bytes.Repeat([]byte(" "), size-len(body)), body...))
		}
	}
	page := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			w.Write([]byte("<!DOCTYPE html><html><head><title>Error</title></head><body><h1>Something went wrong</h1></body></html>"))
		}
	}
	endless := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"valid":true,"padding":"`))
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
	for _, c := range []struct {
		name   string
		answer http.HandlerFunc
		reason string // "": answered online
	}{
		{"an HTML page with 200", page(200), "the server answered something that is not JSON (HTTP 200)"},
		{"an HTML page with 500", page(500), "the server failed (HTTP 500)"},
		{"an HTML page with 404", page(404), "the server answered something that is not JSON (HTTP 404)"},
		{"a JSON error with 500", func(w http.ResponseWriter, _ *http.Request) { apiError(w, 500, "INTERNAL", "bug") }, "the server failed (HTTP 500)"},
		{"a valid answer of exactly 1 MiB", genuine(maxAnswerBytes), ""},
		{"a valid answer of 1 MiB and a byte", genuine(maxAnswerBytes + 1), "the answer is larger than 1 MiB (HTTP 200)"},
		{"a body without end", endless, "the answer is larger than 1 MiB (HTTP 200)"},
	} {
		t.Logf("%s", c.name)
		f.set(c.answer)
		started := time.Now()
		offline := e.client(func(cfg *Config) {
			cfg.ServerAddr = f.addr
			cfg.Offline.CacheDir = filepath.Join(e.dir, "cache-"+strings.ReplaceAll(c.name, " ", "-"))
		}).Validate()
		onlineOnly := e.client(func(cfg *Config) { cfg.ServerAddr = f.addr; cfg.Offline = OfflineConfig{} }).Validate()
		if elapsed := time.Since(started); elapsed > 3*time.Second {
			t.Fatalf("%s: %v for two validations (the request timeout is 10 s)", c.name, elapsed)
		}
		if c.reason == "" {
			expectValid(t, offline, TierOnline)
			expectValid(t, onlineOnly, TierOnline)
			continue
		}
		expectValid(t, offline, TierLicenseFile)
		if onlineOnly.Valid || onlineOnly.IsOffline || onlineOnly.Reason != "SERVER_UNREACHABLE" || onlineOnly.Failures[0].Message != c.reason {
			t.Fatalf("%s: %+v", c.name, onlineOnly.Failures)
		}
	}
}
