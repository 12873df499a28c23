package client

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// ---- offline mode: an air-gapped machine ----

// countingDialer is a real transport that counts the connections it opens.
func countingDialer(dials *atomic.Int64) *http.Client {
	dialer := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dialer.DialContext(ctx, network, addr)
	}}}
}

func expectErrorCode(t *testing.T, err error, code string) {
	t.Helper()
	e, ok := err.(*Error)
	if !ok || e.Code != code {
		t.Fatalf("want an *Error %s, got %#v", code, err)
	}
}

func TestOfflineModeOpensNoConnectionAndReportsTheFilesValidity(t *testing.T) {
	e := newEnv(t)
	var dials atomic.Int64
	var entered []time.Duration
	c := e.client(func(cfg *Config) {
		cfg.ServerAddr = ""
		cfg.HTTPClient = countingDialer(&dials)
		cfg.OnOfflineModeEnter = func(remaining time.Duration) { entered = append(entered, remaining) }
	})
	if !c.IsOffline() {
		t.Fatal("no ServerAddr: offline from the start")
	}
	first := c.Validate()
	c.Validate()
	usage, err := c.ReportUsage("seats", 2)
	if err != nil || !usage.Queued || usage.Accepted {
		t.Fatalf("the report is queued: %+v %v", usage, err)
	}
	if waiting := c.FlushUsageQueue(); waiting != 1 {
		t.Fatalf("offline mode sends nothing: %d waiting", waiting)
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("%d connections opened", n)
	}

	expectValid(t, first, TierLicenseFile)
	if !first.IsOffline || len(first.DecryptionKey) != 32 {
		t.Fatalf("%+v", first)
	}
	if first.HasEntitlement("export") || !first.HasEntitlement("seats") {
		t.Fatal("restricted entitlements apply")
	}
	// writeLicenseFile's file ends 30 days after the fake clock's start.
	if len(entered) != 1 || entered[0] != 30*24*time.Hour {
		t.Fatalf("entered once, with the file's remaining validity: %v", entered)
	}
	if pending := e.clock.Pending(); len(pending) != 1 || pending[0] != 30*24*time.Hour {
		t.Fatalf("the file's end is the only timer (no reconnect loop): %v", pending)
	}
}

// frontServer stands between the client and the env's fake server: it counts every
// request it receives and, as the test says, passes it on, fails at once (503) or
// accepts it and never answers.
type frontServer struct {
	addr      string
	requests  atomic.Int64
	behaviour atomic.Value // "pass", "fail" or "hang"
}

func newFrontServer(t *testing.T, e *env) *frontServer {
	f := &frontServer{}
	f.behaviour.Store("pass")
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		switch f.behaviour.Load() {
		case "fail":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "hang":
			// Read the body first: only then does the server notice a client that hung up.
			_, _ = io.ReadAll(r.Body)
			select {
			case <-r.Context().Done():
			case <-release:
			}
		default:
			e.server.handle(w, r)
		}
	}))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	f.addr = srv.Listener.Addr().String()
	return f
}

func TestOfflineModeIgnoresAServerThatAnswers(t *testing.T) {
	e := newEnv(t)
	front := newFrontServer(t, e)
	front.behaviour.Store("fail")
	c := e.client(func(cfg *Config) {
		cfg.Mode = ModeOffline
		cfg.ServerAddr = front.addr
	})
	for i := 0; i < 3; i++ {
		expectValid(t, c.Validate(), TierLicenseFile)
	}
	if usage, err := c.ReportUsage("seats", 1); err != nil || !usage.Queued {
		t.Fatalf("%+v %v", usage, err)
	}
	c.FlushUsageQueue()
	_, err := c.Release()
	expectErrorCode(t, err, "OFFLINE_ONLY")
	quiet := e.client(func(cfg *Config) {
		cfg.Mode = ModeOffline
		cfg.ServerAddr = front.addr
		cfg.Offline.AllowOfflineUsageReporting = false
	})
	_, err = quiet.ReportUsage("seats", 1)
	expectErrorCode(t, err, "OFFLINE_ONLY")
	if n := front.requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the server", n)
	}
	// The same server in online mode is asked at once: the count above could have moved.
	e.client(func(cfg *Config) { cfg.ServerAddr = front.addr }).Validate()
	if n := front.requests.Load(); n != 1 {
		t.Fatalf("online mode sent %d requests", n)
	}
}

func TestOfflineModeFiresGracePeriodExpiredOnceWhenTheFileRunsOut(t *testing.T) {
	e := newEnv(t)
	expired := 0
	c := e.client(func(cfg *Config) {
		cfg.ServerAddr = ""
		cfg.OnGracePeriodExpired = func() { expired++ }
	})
	expectValid(t, c.Validate(), TierLicenseFile)
	e.clock.Advance(30*24*time.Hour - time.Second)
	if expired != 0 {
		t.Fatal("a second before its end the file still holds")
	}
	e.clock.Advance(time.Second)
	if expired != 1 {
		t.Fatalf("the file's end fired the callback %d times", expired)
	}
	after := c.Validate()
	if after.Valid || after.Reason != "LICENSE_EXPIRED" || len(after.Failures) != 1 || after.Failures[0].Tier != TierLicenseFile {
		t.Fatalf("only the license-file tier, no online tier, no grace token: %+v", after.Failures)
	}
	if expired != 1 {
		t.Fatalf("fired %d times", expired)
	}
	if pending := e.clock.Pending(); len(pending) != 0 {
		t.Fatalf("nothing left to wait for: %v", pending)
	}

	// The vendor sends a new file: a new grace period, whose end fires the callback again.
	now := e.clock.Now()
	writeLicenseFile(t, e.licFile, licOptions{
		key: e.keys.second, keyID: "39f713d0a644253f", hardwareID: testHardwareID,
		validFrom: now.Add(-time.Hour), validUntil: now.Add(60 * 24 * time.Hour), issuedAt: now.Add(-time.Minute),
	})
	expectValid(t, c.Validate(), TierLicenseFile)
	e.clock.Advance(60 * 24 * time.Hour)
	if expired != 2 {
		t.Fatalf("the new file's end fired the callback %d times in all, want 2", expired)
	}
}

func TestOfflineModeStillRefusesAClockSetBack(t *testing.T) {
	e := newEnv(t)
	c := e.client(func(cfg *Config) { cfg.ServerAddr = "" })
	expectValid(t, c.Validate(), TierLicenseFile)
	e.clock.Set(e.clock.Now().Add(-48 * time.Hour))
	r := c.Validate()
	if r.Valid || r.Reason != "CLOCK_ROLLBACK" {
		t.Fatalf("%+v", r.Failures)
	}
}

func TestModeAndConnectTimeoutConfiguration(t *testing.T) {
	e := newEnv(t)
	base := Config{LicenseKey: "K", Version: "1", HardwareID: "hw"}
	enabled := OfflineConfig{Enabled: true, LicenseFile: "x.lic", PublicKey: e.keys.keySetPEM, CacheDir: e.cacheDir}
	refused := func(change func(*Config)) string {
		cfg := base
		change(&cfg)
		c, err := New(cfg)
		if err != nil {
			if _, ok := err.(*ConfigError); !ok {
				t.Fatalf("not a *ConfigError: %#v", err)
			}
			return err.Error()
		}
		c.Close()
		return "accepted"
	}
	for _, c := range []struct {
		what   string
		change func(*Config)
		want   string
	}{
		{"no server and no offline mode", func(*Config) {}, "server address must be <host>:<port>"},
		{"offline mode without the offline tier", func(c *Config) { c.Mode = ModeOffline }, "offline mode needs Offline.Enabled: true"},
		{"an unknown mode", func(c *Config) { c.Mode = "air-gapped" }, `Mode must be "online" or "offline"`},
		{"online mode without a server", func(c *Config) { c.Mode = ModeOnline; c.Offline = enabled }, "server address must be <host>:<port>"},
		{"offline mode with a malformed server", func(c *Config) { c.Mode = ModeOffline; c.Offline = enabled; c.ServerAddr = "http://x" }, "server address must be <host>:<port>"},
		{"a negative budget", func(c *Config) { c.ServerAddr = "127.0.0.1:1"; c.ConnectTimeout = -1 }, "ConnectTimeout must be a positive duration"},
		{"no server, with offline mode", func(c *Config) { c.Offline = enabled }, "accepted"},
	} {
		if got := refused(c.change); got != c.want {
			t.Errorf("%s: %q, want %q", c.what, got, c.want)
		}
	}

	made := func(change func(*Config)) *Client {
		cfg := base
		change(&cfg)
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	offline := made(func(c *Config) { c.Offline = enabled })
	if offline.cfg.mode != ModeOffline || offline.cfg.baseURL != "" {
		t.Fatalf("no server: offline mode, nowhere to send anything (%q %q)", offline.cfg.mode, offline.cfg.baseURL)
	}
	online := made(func(c *Config) { c.ServerAddr = "127.0.0.1:1" })
	if online.cfg.mode != ModeOnline || online.cfg.connectTimeout != 3*time.Second || online.connectTimeout != 3*time.Second {
		t.Fatalf("default: online, 3 s (%q %v %v)", online.cfg.mode, online.cfg.connectTimeout, online.connectTimeout)
	}
	transport := online.http.Transport.(*http.Transport)
	if transport.TLSHandshakeTimeout != 3*time.Second || transport.DialContext == nil {
		t.Fatalf("the budget is on the TLS handshake and the dialer: %v", transport.TLSHandshakeTimeout)
	}
	capped := made(func(c *Config) { c.ServerAddr = "127.0.0.1:1"; c.RequestTimeout = 500 * time.Millisecond })
	if capped.cfg.connectTimeout != 500*time.Millisecond {
		t.Fatalf("at most RequestTimeout: %v", capped.cfg.connectTimeout)
	}
	own := &http.Client{}
	custom := made(func(c *Config) { c.ServerAddr = "127.0.0.1:1"; c.HTTPClient = own })
	if custom.http != own || custom.connectTimeout != 0 {
		t.Fatal("an HTTPClient of the application's is used as it is")
	}

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, message := range []string{"offline mode needs Offline.Enabled: true", `Mode must be "online" or "offline"`, "`ConnectTimeout`"} {
		if !strings.Contains(string(readme), message) {
			t.Errorf("README.md does not list %s", message)
		}
	}
}

// ---- a server that does not answer ----

func timed(f func()) time.Duration {
	started := time.Now()
	f()
	return time.Since(started)
}

func TestABlackHoledServerCostsOneConnectBudget(t *testing.T) {
	e := newEnv(t)
	hole := startBlackHole(t)
	c := e.client(func(cfg *Config) {
		cfg.ServerAddr = hole
		cfg.RequestTimeout = 10 * time.Second
		cfg.ConnectTimeout = time.Second
	})
	var first *Result
	took := timed(func() { first = c.Validate() })
	t.Logf("first validation: %v", took)
	expectValid(t, first, TierLicenseFile)
	if took < 900*time.Millisecond || took > 5*time.Second {
		t.Fatalf("the first validation took %v: it waits for the 1 s budget, not for the 10 s request timeout", took)
	}
	took = timed(func() {
		for i := 0; i < 5; i++ {
			expectValid(t, c.Validate(), TierLicenseFile)
		}
	})
	t.Logf("five more: %v", took)
	if took > 900*time.Millisecond {
		t.Fatalf("five more validations took %v: they went to the network", took)
	}
	// Without the .lic file the failures say why the server was not asked.
	if err := os.Rename(e.licFile, e.licFile+".away"); err != nil {
		t.Fatal(err)
	}
	r := c.Validate()
	if r.Valid || r.Failures[0].Message != "no connection within 1000 ms; reconnecting in the background" {
		t.Fatalf("%+v", r.Failures)
	}
}

func TestTheDefaultConnectBudgetIsThreeSeconds(t *testing.T) {
	e := newEnv(t)
	hole := startBlackHole(t)
	c := e.client(func(cfg *Config) {
		cfg.ServerAddr = hole
		cfg.Offline = OfflineConfig{}
	})
	var r *Result
	took := timed(func() { r = c.Validate() })
	t.Logf("first validation: %v", took)
	if took < 2700*time.Millisecond || took > 7*time.Second {
		t.Fatalf("took %v", took)
	}
	if r.Valid || r.Failures[0].Message != "no connection within 3000 ms" {
		t.Fatalf("%+v", r.Failures)
	}
}

func TestAfterARequestTimeoutTheReconnectLoopAloneGoesToTheNetwork(t *testing.T) {
	e := newEnv(t)
	front := newFrontServer(t, e)
	exited := 0
	c := e.client(func(cfg *Config) {
		cfg.ServerAddr = front.addr
		cfg.RequestTimeout = 500 * time.Millisecond
		cfg.Offline.RetryInterval = 300 * time.Millisecond
		cfg.Offline.MaxRetryInterval = 300 * time.Millisecond
		cfg.OnOfflineModeExit = func() { exited++ }
	})
	front.behaviour.Store("hang")
	took := timed(func() { expectValid(t, c.Validate(), TierLicenseFile) })
	if took < 450*time.Millisecond {
		t.Fatalf("%v: it waited for no request timeout", took)
	}
	sent := front.requests.Load()
	took = timed(func() {
		for i := 0; i < 5; i++ {
			expectValid(t, c.Validate(), TierLicenseFile)
		}
	})
	if took > 400*time.Millisecond || front.requests.Load() != sent {
		t.Fatalf("five more validations took %v and sent %d requests", took, front.requests.Load()-sent)
	}
	front.behaviour.Store("pass")
	e.clock.Advance(300 * time.Millisecond)
	if exited != 1 || c.IsOffline() {
		t.Fatalf("the reconnect loop brought the client back: exited %d, offline %v", exited, c.IsOffline())
	}
	expectValid(t, c.Validate(), TierOnline)
}

func TestQuickFailuresAreTriedOnEveryValidation(t *testing.T) {
	e := newEnv(t)
	front := newFrontServer(t, e)
	c := e.client(func(cfg *Config) {
		cfg.ServerAddr = front.addr
		cfg.RequestTimeout = 300 * time.Millisecond
		cfg.Offline.RetryInterval = time.Second
		cfg.Offline.MaxRetryInterval = time.Second
	})
	front.behaviour.Store("fail")
	for i := 1; i <= 3; i++ {
		expectValid(t, c.Validate(), TierLicenseFile)
		if n := front.requests.Load(); n != int64(i) {
			t.Fatalf("validation %d: %d requests", i, n)
		}
	}
	// A timeout leaves the network to the loop, until the loop's own attempt fails quickly.
	front.behaviour.Store("hang")
	c.Validate()
	c.Validate()
	if n := front.requests.Load(); n != 4 {
		t.Fatalf("%d requests", n)
	}
	front.behaviour.Store("fail")
	e.clock.Advance(time.Second)
	c.Validate()
	if n := front.requests.Load(); n != 6 {
		t.Fatalf("the loop's attempt and the validation after it: %d requests, want 6", n)
	}
}

func TestWhenTheLoopHasGivenUpValidationGoesToTheNetworkAgain(t *testing.T) {
	e := newEnv(t)
	front := newFrontServer(t, e)
	c := e.client(func(cfg *Config) {
		cfg.ServerAddr = front.addr
		cfg.RequestTimeout = 300 * time.Millisecond
		cfg.Offline.RetryInterval = time.Second
		cfg.Offline.MaxRetryAttempts = 1
	})
	front.behaviour.Store("hang")
	c.Validate()
	e.clock.Advance(time.Second) // the one attempt, which times out too
	if pending := e.clock.Pending(); len(pending) != 0 || front.requests.Load() != 2 {
		t.Fatalf("the loop made its one attempt and stopped: %v, %d requests", pending, front.requests.Load())
	}
	c.Validate()
	if n := front.requests.Load(); n != 3 {
		t.Fatalf("%d requests", n)
	}
}

func TestValidationDoesNotWaitForTheLoopsAttempt(t *testing.T) {
	e := newEnv(t)
	front := newFrontServer(t, e)
	c := e.client(func(cfg *Config) {
		cfg.ServerAddr = front.addr
		cfg.RequestTimeout = time.Second
		cfg.Offline.RetryInterval = time.Second
		cfg.Offline.MaxRetryInterval = time.Second
	})
	front.behaviour.Store("hang")
	c.Validate()
	attempted := make(chan struct{})
	go func() {
		defer close(attempted)
		e.clock.Advance(time.Second) // the loop's attempt, hanging for a second
	}()
	eventually(t, "the loop's attempt reached the server", func() bool { return front.requests.Load() == 2 })
	took := timed(func() { expectValid(t, c.Validate(), TierLicenseFile) })
	if took > 300*time.Millisecond {
		t.Fatalf("the validation waited %v for the loop's attempt", took)
	}
	<-attempted
	if front.requests.Load() != 2 {
		t.Fatal("the validation went to the network")
	}
}
