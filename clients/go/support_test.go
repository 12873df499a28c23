package client

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"licenseserver.example/client/offline"
)

// ---- a clock whose time moves only when the test says ----

// fakeClock mirrors test/support/fake-clock.ts: timers run on elapsed time, Advance fires
// them in order (on the test's goroutine), Set changes the wall clock only.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	elapsed time.Duration
	timers  map[int]*fakeTimer
	next    int
}

type fakeTimer struct {
	clock *fakeClock
	id    int
	at    time.Duration
	delay time.Duration
	f     func()
}

func newFakeClock(start time.Time) *fakeClock {
	return &fakeClock{now: start, timers: map[int]*fakeTimer{}}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d < 0 {
		d = 0
	}
	c.next++
	at := c.elapsed + d
	if at < c.elapsed {
		at = math.MaxInt64 // as a real timer does: a delay past the end of time.Duration never comes
	}
	timer := &fakeTimer{clock: c, id: c.next, at: at, delay: d, f: f}
	c.timers[timer.id] = timer
	return timer
}

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	_, waiting := t.clock.timers[t.id]
	delete(t.clock.timers, t.id)
	return waiting
}

// Advance moves time forward, firing every timer that falls due on the way, in order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.elapsed + d
	for fired := 0; ; fired++ {
		if fired > 10000 {
			c.mu.Unlock()
			panic("more than 10,000 timers fired in one Advance: a timer loop")
		}
		var due *fakeTimer
		for _, t := range c.timers {
			if t.at <= target && (due == nil || t.at < due.at || (t.at == due.at && t.id < due.id)) {
				due = t
			}
		}
		if due == nil {
			break
		}
		delete(c.timers, due.id)
		c.now = c.now.Add(due.at - c.elapsed)
		c.elapsed = due.at
		c.mu.Unlock()
		due.f()
		c.mu.Lock()
	}
	c.now = c.now.Add(target - c.elapsed)
	c.elapsed = target
	c.mu.Unlock()
}

// Set sets the wall clock outright, as a user changing the system clock would.
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Pending lists the delays of the timers waiting now, soonest first.
func (c *fakeClock) Pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := make([]*fakeTimer, 0, len(c.timers))
	for _, t := range c.timers {
		list = append(list, t)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].at < list[j].at })
	out := make([]time.Duration, len(list))
	for i, t := range list {
		out[i] = t.delay
	}
	return out
}

// ---- the vectors' keys ----

var vectorsDir = filepath.Join("..", "..", "test", "vectors")

type vectorKeys struct {
	first, second ed25519.PrivateKey // RFC 8032 TEST 1 (no key_id) and TEST 2 (key id 39f713d0a644253f)
	firstPEM      string
	keySetPEM     []byte
}

func loadKeys(t *testing.T) *vectorKeys {
	t.Helper()
	var v struct {
		SigningSecretKeyHex string `json:"signing_secret_key_hex"`
		SecondSecretKeyHex  string `json:"second_secret_key_hex"`
		PublicKeyPEM        string `json:"public_key_pem"`
	}
	data, err := os.ReadFile(filepath.Join(vectorsDir, "offline-license-v1.json"))
	if err != nil {
		t.Fatalf("reading the vectors: %v", err)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	seed := func(h string) ed25519.PrivateKey {
		b, _ := hex.DecodeString(h)
		return ed25519.NewKeyFromSeed(b)
	}
	set, err := os.ReadFile(filepath.Join(vectorsDir, "key-set.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return &vectorKeys{first: seed(v.SigningSecretKeyHex), second: seed(v.SecondSecretKeyHex), firstPEM: v.PublicKeyPEM, keySetPEM: set}
}

// ---- a license server that answers as docs/http-api.md documents ----

const (
	testLicenseKey = "7KQ2-M9XD-1RTV-ABCD-EFGH-JKMN-PQRS"
	testLicenseID  = "c2a1b9e4-5d7f-4a3b-9e1c-0f2d3b4a5c6d"
	testHardwareID = "HW-4f2a-9c1e-ü"
)

var testDecryptionKey = func() []byte {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

type usageRecord struct {
	code     string
	quantity int64
	hardware string
}

type fakeServer struct {
	t     *testing.T
	clock *fakeClock
	keys  *vectorKeys

	mu        sync.Mutex
	addr      string
	srv       *httptest.Server
	running   bool
	active    bool
	reason    string // the "not valid" reason when !active
	floating  time.Duration
	mode      string // "", "status:<code>:<body>", "garbage", "hang"
	signer    ed25519.PrivateKey
	kid       string
	sealFor   string // seal the decryption key for this hardware ID instead of the caller's
	used      map[string]int64
	limits    map[string]int64
	seen      map[string]usageRecord
	records   int
	validates int
	releases  int
	grace     time.Duration // how long its grace tokens last; 0: 72 h, the server's default
	seatless  bool          // usage reports are refused with SEAT_REQUIRED, as for a machine without a seat
	hang      chan struct{}
}

func newFakeServer(t *testing.T, clock *fakeClock, keys *vectorKeys) *fakeServer {
	s := &fakeServer{
		t: t, clock: clock, keys: keys, active: true, signer: keys.second, kid: "39f713d0a644253f",
		used: map[string]int64{}, limits: map[string]int64{"seats": 100}, seen: map[string]usageRecord{},
		hang: make(chan struct{}),
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = listener.Addr().String()
	s.serve(listener)
	t.Cleanup(func() {
		close(s.hang)
		s.stop()
	})
	return s
}

func (s *fakeServer) serve(listener net.Listener) {
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.handle))
	s.srv.Listener.Close()
	s.srv.Listener = listener
	s.srv.Start()
	s.running = true
}

// stop closes the server: connections are refused, as with a stopped daemon.
func (s *fakeServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		s.srv.CloseClientConnections()
		s.srv.Close()
		s.running = false
	}
}

// start listens again on the same address.
func (s *fakeServer) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return
	}
	var listener net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if listener, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("cannot listen on %s again: %v", s.addr, err)
	}
	s.serve(listener)
}

func (s *fakeServer) set(change func(s *fakeServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	change(s)
}

func (s *fakeServer) usedOf(code string) (int64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used[code], s.records
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func apiError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": message}})
}

func b64url(data []byte) string { return base64.RawURLEncoding.EncodeToString(data) }

func (s *fakeServer) entitlements() []map[string]any {
	return []map[string]any{
		{"code": "export", "name": "Export reports", "usage_limit": nil},
		{"code": "seats", "name": "Seats", "usage_limit": s.limits["seats"]},
	}
}

// graceToken signs a token as the server's encodeGraceToken does.
func (s *fakeServer) graceToken(hardwareID string, iat, exp time.Time) string {
	header, _ := json.Marshal(map[string]string{"alg": "EdDSA", "typ": "JWT", "kid": s.kid})
	claims, _ := json.Marshal(map[string]any{
		"iss": "licenses.example.com", "sub": testLicenseID, "iat": iat.Unix(), "nbf": iat.Unix(), "exp": exp.Unix(),
		"jti": newUUID(), "license_id": testLicenseID, "license_key_prefix": "7KQ2-M9X", "license_type": "hybrid",
		"hardware_id": hardwareID, "license_valid_until": "2030-01-01T00:00:00Z", "entitlements": s.entitlements(),
	})
	input := b64url(header) + "." + b64url(claims)
	return input + "." + b64url(ed25519.Sign(s.signer, []byte(input)))
}

func (s *fakeServer) handle(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	mode := s.mode
	s.mu.Unlock()
	switch {
	case mode == "hang":
		// Read the body first: only then does the server notice a client that hung up.
		_, _ = io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
		case <-s.hang:
		}
		return
	case mode == "garbage":
		w.Write([]byte("<html>maintenance</html>"))
		return
	case strings.HasPrefix(mode, "status:"):
		var status int
		var body string
		fmt.Sscanf(mode, "status:%d:", &status)
		body = mode[strings.Index(mode[7:], ":")+8:]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
		return
	}
	data, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		apiError(w, 400, "INVALID_JSON", "the body is not JSON")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now().UTC().Truncate(time.Second)
	serverTime := now.Format(time.RFC3339)
	switch r.URL.Path {
	case "/api/v1/validate":
		s.validates++
		hardwareID, _ := body["hardware_id"].(string)
		if body["license_key"] != testLicenseKey {
			writeJSON(w, 200, map[string]any{"valid": false, "reason": "LICENSE_NOT_FOUND", "message": "no such license", "server_time": serverTime})
			return
		}
		if !s.active {
			writeJSON(w, 200, map[string]any{"valid": false, "reason": s.reason, "message": "the license is not active", "server_time": serverTime})
			return
		}
		sealFor := hardwareID
		if s.sealFor != "" {
			sealFor = s.sealFor
		}
		sealed, err := offline.SealDecryptionKey(testDecryptionKey, sealFor, testLicenseID, nil)
		if err != nil {
			s.t.Error(err)
		}
		exp := now.Add(72 * time.Hour)
		if s.grace > 0 {
			exp = now.Add(s.grace)
		}
		answer := map[string]any{
			"valid": true, "license_id": testLicenseID, "license_key_prefix": "7KQ2-M9X", "license_type": "hybrid",
			"valid_from": "2026-01-01T00:00:00Z", "valid_until": "2030-01-01T00:00:00Z", "entitlements": s.entitlements(),
			"encrypted_key": sealed, "machine_id": "9d0f6c1e-3b7a-4c2d-8e5f-1a2b3c4d5e6f", "server_time": serverTime,
		}
		if s.floating > 0 {
			exp = now.Add(s.floating)
			answer["lease_expires_at"] = exp.Format(time.RFC3339)
		}
		answer["grace_token"] = s.graceToken(hardwareID, now, exp)
		answer["grace_expires_at"] = exp.Format(time.RFC3339)
		writeJSON(w, 200, answer)
	case "/api/v1/usage":
		if body["license_key"] != testLicenseKey {
			apiError(w, 404, "LICENSE_NOT_FOUND", "no such license")
			return
		}
		code, _ := body["entitlement_code"].(string)
		quantity, _ := body["quantity"].(float64)
		key, _ := body["idempotency_key"].(string)
		hardwareID, _ := body["hardware_id"].(string)
		if _, ok := body["occurred_at"].(string); !ok || key == "" || quantity < 1 {
			apiError(w, 400, "INVALID_INPUT", "a field is missing")
			return
		}
		limit, known := s.limits[code]
		if !known {
			apiError(w, 404, "ENTITLEMENT_NOT_FOUND", "the license has no entitlement "+code)
			return
		}
		record := usageRecord{code: code, quantity: int64(quantity), hardware: hardwareID}
		if previous, seen := s.seen[key]; seen {
			if previous != record {
				apiError(w, 409, "IDEMPOTENCY_KEY_REUSED", "the key was used for a different report")
				return
			}
			writeJSON(w, 200, map[string]any{"replayed": true, "entitlement_code": code, "quantity": int64(quantity), "used": s.used[code], "usage_limit": limit, "remaining": limit - s.used[code]})
			return
		}
		if s.seatless {
			apiError(w, 422, "SEAT_REQUIRED", "usage is not counted from this machine: it holds no seat of the license now")
			return
		}
		if s.used[code]+int64(quantity) > limit {
			apiError(w, 422, "USAGE_LIMIT_EXCEEDED", "the report would exceed the limit")
			return
		}
		s.seen[key] = record
		s.used[code] += int64(quantity)
		s.records++
		writeJSON(w, 201, map[string]any{"replayed": false, "entitlement_code": code, "quantity": int64(quantity), "used": s.used[code], "usage_limit": limit, "remaining": limit - s.used[code]})
	case "/api/v1/release":
		s.releases++
		if body["license_key"] != testLicenseKey {
			apiError(w, 404, "LICENSE_NOT_FOUND", "no such license")
			return
		}
		if s.floating > 0 {
			// The seat is free when the lease (the grace token given last) ends: a minute's worth here.
			freeAt := s.clock.Now().Add(time.Minute).UTC().Format(time.RFC3339)
			writeJSON(w, 200, map[string]any{"released": true, "seat_free_at": freeAt, "message": "the seat is free at " + freeAt + ", when the grace token given to this machine ends", "server_time": serverTime})
		} else {
			writeJSON(w, 200, map[string]any{"released": false, "seat_free_at": nil, "message": "the license is not floating", "server_time": serverTime})
		}
	default:
		apiError(w, 404, "ROUTE_NOT_FOUND", "no route")
	}
}

// ---- .lic files ----

type licOptions struct {
	key        ed25519.PrivateKey
	keyID      string
	hardwareID string
	prefix     string
	validFrom  time.Time
	validUntil time.Time
	issuedAt   time.Time
}

func obj(pairs ...any) *offline.Object {
	o := &offline.Object{Values: map[string]any{}}
	for i := 0; i < len(pairs); i += 2 {
		name := pairs[i].(string)
		o.Names = append(o.Names, name)
		o.Values[name] = pairs[i+1]
	}
	return o
}

// writeLicenseFile writes a .lic as the server's checkout does.
func writeLicenseFile(t *testing.T, path string, o licOptions) {
	t.Helper()
	format := func(tm time.Time) string { return tm.UTC().Format("2006-01-02T15:04:05Z") }
	if o.prefix == "" {
		o.prefix = "7KQ2-M9X"
	}
	payload := obj(
		"version", 1.0, "license_id", testLicenseID, "license_key_prefix", o.prefix,
		"customer_name", "Müller & Söhne", "license_type", "hybrid",
		"valid_from", format(o.validFrom), "valid_until", format(o.validUntil), "hardware_id", o.hardwareID,
		"entitlements", []any{
			obj("code", "export", "name", "Export reports", "usage_limit", nil),
			obj("code", "seats", "name", "Seats", "usage_limit", 100.0),
		},
		"issued_at", format(o.issuedAt), "issuer", "licenses.example.com",
	)
	if o.hardwareID != "" {
		sealed, err := offline.SealDecryptionKey(testDecryptionKey, o.hardwareID, testLicenseID, nil)
		if err != nil {
			t.Fatal(err)
		}
		payload.Names = append(payload.Names, "encrypted_key")
		payload.Values["encrypted_key"] = sealed
	}
	if o.keyID != "" {
		payload.Names = append(payload.Names, "key_id")
		payload.Values["key_id"] = o.keyID
	}
	message, err := offline.Canonicalize(payload)
	if err != nil {
		t.Fatal(err)
	}
	payload.Names = append(payload.Names, "signature")
	payload.Values["signature"] = offline.EncodeBase64(ed25519.Sign(o.key, message))
	document, _ := offline.Canonicalize(payload)
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(document)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ---- the test's environment ----

type env struct {
	t        *testing.T
	dir      string
	clock    *fakeClock
	keys     *vectorKeys
	server   *fakeServer
	licFile  string
	cacheDir string
}

var testStart = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newEnv(t *testing.T) *env {
	dir := t.TempDir()
	clock := newFakeClock(testStart)
	keys := loadKeys(t)
	e := &env{t: t, dir: dir, clock: clock, keys: keys, server: newFakeServer(t, clock, keys),
		licFile: filepath.Join(dir, "license.lic"), cacheDir: filepath.Join(dir, "cache")}
	writeLicenseFile(t, e.licFile, licOptions{
		key: keys.second, keyID: "39f713d0a644253f", hardwareID: testHardwareID,
		validFrom: testStart.Add(-24 * time.Hour), validUntil: testStart.Add(30 * 24 * time.Hour), issuedAt: testStart.Add(-time.Hour),
	})
	return e
}

// config is the usual configuration; change adjusts it.
func (e *env) config(change ...func(*Config)) Config {
	cfg := Config{
		ServerAddr: e.server.addr,
		LicenseKey: testLicenseKey,
		Version:    "2.1.0",
		HardwareID: testHardwareID,
		Clock:      e.clock,
		Offline: OfflineConfig{
			Enabled:                    true,
			LicenseFile:                e.licFile,
			PublicKey:                  e.keys.keySetPEM,
			CacheDir:                   e.cacheDir,
			RestrictedEntitlements:     []string{"export"},
			AllowOfflineUsageReporting: true,
		},
	}
	for _, f := range change {
		f(&cfg)
	}
	return cfg
}

func (e *env) client(change ...func(*Config)) *Client {
	e.t.Helper()
	c, err := New(e.config(change...))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		c.Close()
		c.background.Wait()
	})
	return c
}

func (e *env) stateDir() string { return filepath.Join(e.cacheDir, cacheID(testLicenseKey)) }

func (e *env) exists(name string) bool {
	_, err := os.Stat(filepath.Join(e.stateDir(), name))
	return err == nil
}

func codes(r *Result) []string {
	out := make([]string, len(r.Failures))
	for i, f := range r.Failures {
		out[i] = f.Code
	}
	return out
}

func expectCodes(t *testing.T, r *Result, want ...string) {
	t.Helper()
	if got := strings.Join(codes(r), ","); got != strings.Join(want, ",") {
		t.Fatalf("failures %s, want %s (%+v)", got, strings.Join(want, ","), r.Failures)
	}
}

func expectValid(t *testing.T, r *Result, source Tier) {
	t.Helper()
	if !r.Valid || r.Source != source {
		t.Fatalf("want valid from %s, got valid=%v source=%q failures %+v", source, r.Valid, r.Source, r.Failures)
	}
}

// eventually waits (in real time) until check holds.
func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func queueLength(t *testing.T, dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	return len(entries)
}
