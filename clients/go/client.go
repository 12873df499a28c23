package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"licenseserver.example/client/offline"
)

// Client checks a license: online, then the .lic file, then the cached grace token. Its
// methods may be called from several goroutines; validations run one at a time.
type Client struct {
	cfg       *resolved
	callbacks Config
	clock     Clock
	http      *http.Client
	store     *store
	trust     *offlineTrust
	keys      *keyRing
	keyPrefix string
	// connectTimeout is the budget of the client's own transport; 0 with Config.HTTPClient,
	// whose transport has its own.
	connectTimeout time.Duration

	// runMu makes validations (and background retries, once their answer is in) run one
	// at a time; it guards the trust state and the cache files they use.
	runMu sync.Mutex
	// mu guards the fields below.
	mu                sync.Mutex
	offline           bool
	closed            bool
	retryAttempt      int
	retryTimer        Timer
	graceTimer        Timer
	leaseTimer        Timer
	graceExpiredFired bool
	// timedOutReason is why the last failed attempt to reach the server timed out; "" when
	// it did not time out (see reconnectingInBackground).
	timedOutReason string
	// retrying is true while a reconnect attempt is under way.
	retrying bool

	// previousOnce finds previousID, the hw1- ID used before, once (previous.go).
	previousOnce sync.Once
	previousID   string

	// flushMu makes queue flushes run one at a time.
	flushMu sync.Mutex
	// background counts flushes started in the background (for tests).
	background sync.WaitGroup
}

// New checks the configuration and makes a client; it talks to nobody yet. Its only
// error is *ConfigError.
func New(cfg Config) (*Client, error) {
	resolved, err := resolve(&cfg)
	if err != nil {
		return nil, err
	}
	clock := cfg.Clock
	if clock == nil {
		clock = SystemClock
	}
	httpClient, connectTimeout := cfg.HTTPClient, time.Duration(0)
	if httpClient == nil {
		httpClient, connectTimeout = newHTTPClient(resolved.connectTimeout), resolved.connectTimeout
	}
	st := newStore(resolved.cacheDir, resolved.licenseKey)
	return &Client{
		cfg:            resolved,
		callbacks:      cfg,
		clock:          clock,
		http:           httpClient,
		connectTimeout: connectTimeout,
		store:          st,
		trust:          &offlineTrust{store: st, persist: resolved.enabled},
		keys: &keyRing{
			builtIn: resolved.keys,
			cfg:     resolved.keyRefresh,
			enabled: resolved.keyRefresh.Enabled && resolved.baseURL != "",
			store:   st,
		},
		keyPrefix: licenseKeyPrefix(resolved.licenseKey),
	}, nil
}

// newHTTPClient is the default transport with connectTimeout on the TCP connection and on
// the TLS handshake: a server whose packets are dropped then costs that, not RequestTimeout.
func newHTTPClient(connectTimeout time.Duration) *http.Client {
	// A clone keeps what the application set on the default transport (a proxy, a CA).
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		base = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	}
	transport := base.Clone()
	transport.DialContext = (&net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}).DialContext
	transport.TLSHandshakeTimeout = connectTimeout
	return &http.Client{Transport: transport}
}

// HardwareID is the hardware ID in use: the configured one, or the derived one.
func (c *Client) HardwareID() string { return c.cfg.hardwareID }

// IsOffline is true while the server is unreachable and the client answers from its
// offline tiers, and always in ModeOffline.
func (c *Client) IsOffline() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offline || c.cfg.mode == ModeOffline
}

// CacheDir is the directory of this license's state files.
func (c *Client) CacheDir() string { return c.store.dir }

// Validate walks the chain and returns the answer; it never fails and never hangs
// (every call to the server has RequestTimeout, and a connection ConnectTimeout).
// After an attempt that timed out, while the reconnect loop has an attempt scheduled or
// under way, it answers from the offline tiers without going to the network. In
// ModeOffline it reads the .lic file only. Callbacks it triggers run on the calling
// goroutine before it returns.
func (c *Client) Validate() *Result { return c.ValidateContext(context.Background()) }

// ValidateContext is Validate with a context that can cancel the call to the server
// (a cancelled call counts as the server being unreachable).
func (c *Client) ValidateContext(ctx context.Context) *Result {
	var pending []func()
	c.runMu.Lock()
	result := c.validateLocked(ctx, &pending)
	c.runMu.Unlock()
	for _, callback := range pending {
		callback()
	}
	return result
}

func (c *Client) validateLocked(ctx context.Context, pending *[]func()) (result *Result) {
	if c.isClosed() {
		return c.invalid(false, []TierFailure{{Tier: TierOnline, Code: "CLIENT_CLOSED", Message: "the client is closed"}})
	}
	warnings := &cacheWarnings{}
	defer func() {
		if r := recover(); r != nil {
			result = c.invalid(c.IsOffline(), []TierFailure{{Tier: TierOnline, Code: "INTERNAL", Message: fmt.Sprint(r)}})
		}
		result.Warnings = warnings.list
	}()
	return c.runChain(ctx, warnings.save, pending)
}

// ReportUsage reports usage of an entitlement (POST /api/v1/usage) with a fresh
// idempotency key. Online it is counted at once; when the server cannot be reached and
// offline usage reporting is on, it waits in a crash-safe queue and is sent, in order and
// counted once, when the server is back. The server's refusals (over the limit, unknown
// entitlement) are an *Error with its code; SERVER_UNREACHABLE with offline reporting
// off (OFFLINE_ONLY in ModeOffline, where a report is only ever queued);
// CACHE_NOT_WRITTEN when the queue cannot be written.
func (c *Client) ReportUsage(code string, quantity int64) (*UsageResult, error) {
	return c.ReportUsageContext(context.Background(), code, quantity)
}

// ReportUsageContext is ReportUsage with a context.
func (c *Client) ReportUsageContext(ctx context.Context, code string, quantity int64) (*UsageResult, error) {
	report := &queuedUsage{EntitlementCode: code, Quantity: quantity, OccurredAt: isoMillis(c.clock.Now()), IdempotencyKey: newUUID()}
	if !c.IsOffline() {
		raw, _ := json.Marshal(report)
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(raw, &fields)
		r := c.sendUsage(ctx, fields)
		if !r.unreachable {
			if r.status == 200 || r.status == 201 {
				return &UsageResult{Accepted: true, Remaining: integerOf(r.body.Values["remaining"])}, nil
			}
			code, message := errorOf(r.body, r.status, "report")
			return nil, &Error{Code: code, Message: message}
		}
	}
	if !c.cfg.enabled || !c.cfg.offlineUsage {
		if c.cfg.mode == ModeOffline {
			return nil, &Error{Code: "OFFLINE_ONLY", Message: "the client is in offline mode and offline usage reporting is off"}
		}
		return nil, &Error{Code: "SERVER_UNREACHABLE", Message: "the server cannot be reached and offline usage reporting is off"}
	}
	if err := c.store.enqueue(report); err != nil {
		return nil, &Error{Code: "CACHE_NOT_WRITTEN", Message: "the report could not be queued: " + err.Error()}
	}
	return &UsageResult{Queued: true}, nil
}

// FlushUsageQueue sends the queued usage reports now, in order, each with its idempotency
// key, and returns how many still wait (0: the queue is empty). A valid online answer
// already starts this flush in the background; a program that is about to exit calls
// FlushUsageQueue so that the flush is not cut short with it: it waits for a flush under
// way instead of racing it. While the client is offline nothing is sent (the retry timer
// sends the queue when the server is back), and sending stops at the first report the
// server cannot receive. Each report waits at most RequestTimeout for the server.
func (c *Client) FlushUsageQueue() int { return c.FlushUsageQueueContext(context.Background()) }

// FlushUsageQueueContext is FlushUsageQueue with a context.
func (c *Client) FlushUsageQueueContext(ctx context.Context) int {
	if !c.IsOffline() {
		c.flushQueue(ctx)
	}
	return c.store.queueLength()
}

// Release gives a floating seat back (POST /api/v1/release). The cached grace token is
// deleted first: this machine stops using its lease. The seat is free for another machine
// at SeatFreeAt, when that token would have ended, not before. Errors are *Error:
// SERVER_UNREACHABLE (the seat is then given back when its lease runs out),
// CACHE_NOT_WRITTEN, OFFLINE_ONLY in ModeOffline, or the server's error code.
func (c *Client) Release() (*ReleaseResult, error) { return c.ReleaseContext(context.Background()) }

// ReleaseContext is Release with a context.
func (c *Client) ReleaseContext(ctx context.Context) (*ReleaseResult, error) {
	if c.cfg.mode == ModeOffline {
		return nil, &Error{Code: "OFFLINE_ONLY", Message: "the client is in offline mode: it holds no lease to give back"}
	}
	c.mu.Lock()
	stop(&c.leaseTimer)
	c.mu.Unlock()
	if c.cfg.enabled {
		if err := c.store.deleteGrace(); err != nil {
			return nil, &Error{Code: "CACHE_NOT_WRITTEN", Message: err.Error()}
		}
	}
	r := c.postJSON(ctx, "/api/v1/release", map[string]string{"license_key": c.cfg.licenseKey, "hardware_id": c.cfg.hardwareID})
	if r.unreachable {
		return nil, &Error{Code: "SERVER_UNREACHABLE", Message: r.reason + "; the seat is given back when its lease runs out"}
	}
	if r.status != 200 {
		code, message := errorOf(r.body, r.status, "release")
		return nil, &Error{Code: code, Message: message}
	}
	released, _ := r.body.Values["released"].(bool)
	seatFreeAt, _ := r.body.Values["seat_free_at"].(string)
	message, _ := r.body.Values["message"].(string)
	return &ReleaseResult{Released: released, SeatFreeAt: seatFreeAt, Message: message}, nil
}

// Close stops every timer; the client answers nothing afterwards (Validate returns
// CLIENT_CLOSED).
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	stop(&c.retryTimer)
	stop(&c.graceTimer)
	stop(&c.leaseTimer)
	if c.connectTimeout > 0 {
		// The client's own transport: nobody else will use its idle connections.
		c.http.CloseIdleConnections()
	}
}

func stop(timer *Timer) {
	if *timer != nil {
		(*timer).Stop()
		*timer = nil
	}
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Client) runChain(ctx context.Context, save save, pending *[]func()) *Result {
	if c.cfg.mode == ModeOffline {
		return c.runOfflineOnly(save, pending)
	}
	var failures []TierFailure
	if reason, reconnecting := c.reconnectingInBackground(); reconnecting {
		// The loop's own attempts bring the client back; a black-holed server must not cost
		// every call its connect budget.
		failures = append(failures, TierFailure{Tier: TierOnline, Code: "SERVER_UNREACHABLE", Message: reason + "; reconnecting in the background"})
	} else {
		// Alongside the validation, so that an unreachable server costs its timeout once.
		var refreshed chan struct{}
		if c.keys.due(c.clock.Now()) {
			refreshed = make(chan struct{})
			go func() {
				defer close(refreshed)
				c.RefreshKeys(ctx)
			}()
		}
		r := c.askValidate(ctx, save)
		if refreshed != nil {
			<-refreshed
		}
		online, reason := c.answerOf(r, save)
		if online != nil {
			if c.IsOffline() {
				c.leaveOfflineMode(ctx, pending)
			} else if online.Valid {
				c.flushInBackground()
			}
			return online
		}
		c.noteFailedAttempt(r)
		failures = append(failures, TierFailure{Tier: TierOnline, Code: "SERVER_UNREACHABLE", Message: reason})
	}
	if !c.cfg.enabled {
		return c.invalid(false, failures)
	}

	// One reading of the clock for the whole offline check; it becomes the trusted time.
	now := c.clock.Now()
	refused := c.trust.check(now.UnixMilli(), save)
	var result *Result
	if refused != nil {
		failures = append(failures,
			TierFailure{Tier: TierLicenseFile, Code: refused.code, Message: refused.message},
			TierFailure{Tier: TierGraceToken, Code: refused.code, Message: refused.message})
		result = c.invalid(true, failures)
	} else if r, _ := c.fromLicenseFile(now, &failures, save); r != nil {
		result = r
	} else if r := c.fromGraceToken(now, &failures); r != nil {
		result = r
	} else {
		result = c.invalid(true, failures)
	}

	c.mu.Lock()
	entering := !c.offline
	if entering {
		c.offline = true
		c.retryAttempt = 0
	}
	c.mu.Unlock()
	if entering {
		var remaining time.Duration
		if refused == nil {
			remaining = c.remainingGrace(now)
		}
		if callback := c.callbacks.OnOfflineModeEnter; callback != nil {
			*pending = append(*pending, func() { callback(remaining) })
		}
		c.scheduleRetry()
	}
	if !result.Valid && hasCode(failures, "GRACE_TOKEN_EXPIRED") {
		c.gracePeriodExpired(pending)
	}
	return result
}

// runOfflineOnly is ModeOffline, for an air-gapped machine: the .lic file alone, no
// network call ever. The callbacks speak of the file: entering reports how long it stays
// valid, and its end is the end of the grace period.
func (c *Client) runOfflineOnly(save save, pending *[]func()) *Result {
	now := c.clock.Now()
	var failures []TierFailure
	var result *Result
	var validUntil time.Time
	if refused := c.trust.check(now.UnixMilli(), save); refused != nil {
		failures = append(failures, TierFailure{Tier: TierLicenseFile, Code: refused.code, Message: refused.message})
	} else {
		result, validUntil = c.fromLicenseFile(now, &failures, save)
	}
	var remaining time.Duration
	c.mu.Lock()
	if result != nil {
		// A new file put in place after the old one ran out starts a new grace period.
		c.graceExpiredFired = false
	}
	c.mu.Unlock()
	if result != nil {
		remaining = validUntil.Sub(now)
		c.scheduleGraceExpiry(validUntil)
	}
	c.mu.Lock()
	entering := !c.offline
	c.offline = true
	c.mu.Unlock()
	if callback := c.callbacks.OnOfflineModeEnter; entering && callback != nil {
		*pending = append(*pending, func() { callback(remaining) })
	}
	if result != nil {
		return result
	}
	if hasCode(failures, "LICENSE_EXPIRED") {
		c.gracePeriodExpired(pending)
	}
	return c.invalid(true, failures)
}

// gracePeriodExpired calls OnGracePeriodExpired once per grace period.
func (c *Client) gracePeriodExpired(pending *[]func()) {
	c.mu.Lock()
	fire := !c.graceExpiredFired
	c.graceExpiredFired = true
	c.mu.Unlock()
	if callback := c.callbacks.OnGracePeriodExpired; fire && callback != nil {
		*pending = append(*pending, callback)
	}
}

// reconnectingInBackground is true after an attempt that timed out while the reconnect
// loop has an attempt scheduled or under way: that loop, not Validate, goes to the
// network, so a black-holed server costs one ConnectTimeout and not one per call. A
// refused connection or an error answer costs nothing, so those are tried every time.
// The reason is the timed-out attempt's.
func (c *Client) reconnectingInBackground() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timedOutReason, c.offline && c.timedOutReason != "" && (c.retryTimer != nil || c.retrying)
}

// noteFailedAttempt keeps whether an attempt that found the server unreachable timed out.
func (c *Client) noteFailedAttempt(r reply) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timedOutReason = ""
	if r.timedOut {
		c.timedOutReason = r.reason
	}
}

// askValidate is POST /api/v1/validate; answerOf reads its reply.
func (c *Client) askValidate(ctx context.Context, save save) reply {
	body := map[string]string{"license_key": c.cfg.licenseKey, "hardware_id": c.cfg.hardwareID, "version": c.cfg.version}
	if previous := c.previousHardwareID(save); previous != "" {
		body["previous_hardware_id"] = previous
	}
	return c.postJSON(ctx, "/api/v1/validate", body)
}

// answerOf reads the server's reply to a validation. It returns a result for an answer
// (valid, the server's authoritative "not valid", or a 4xx error), or nil and the reason
// the server counts as unreachable.
func (c *Client) answerOf(r reply, save save) (*Result, string) {
	if r.unreachable {
		return nil, r.reason
	}
	body := r.body.Values
	token, hasToken := body["grace_token"].(string)
	list, hasList := body["entitlements"].([]any)
	licenseID, hasLicenseID := body["license_id"].(string)
	if r.status == 200 && body["valid"] == true && hasToken && hasList && hasLicenseID {
		var decryptionKey []byte
		if sealed, ok := body["encrypted_key"].(string); ok {
			var key []byte
			var err error
			if machineKey, forMachine := body["machine_key"].(string); forMachine {
				key, err = c.unsealOnlineForMachine(sealed, machineKey, licenseID)
			} else {
				key, err = offline.UnsealDecryptionKey(sealed, c.cfg.hardwareID, licenseID)
			}
			if err != nil {
				return c.invalid(false, []TierFailure{failureOf(TierOnline, err)}), ""
			}
			decryptionKey = key
		}
		entitlements := offline.EntitlementsOf(list)
		c.rememberValid(token, licenseID, entitlements, body["server_time"], save)
		c.mu.Lock()
		c.graceExpiredFired = false
		c.mu.Unlock()
		c.scheduleLeaseRenewal(body["lease_expires_at"], body["server_time"])
		return c.valid(TierOnline, entitlements, licenseID, decryptionKey), ""
	}
	if reason, ok := body["reason"].(string); r.status == 200 && body["valid"] == false && ok {
		// Authoritative, whatever the reason: a revoked license must not live on offline.
		message, ok := body["message"].(string)
		if !ok {
			message = "the server says the license is not valid"
		}
		c.rememberInvalid(reason, message, body["server_time"], save)
		return c.invalid(false, []TierFailure{{Tier: TierOnline, Code: reason, Message: message}}), ""
	}
	if r.status == 200 {
		return nil, "the server answered JSON of an unexpected shape"
	}
	// Any other answer (a 4xx error) is about the request, not a verdict on the license:
	// nothing is remembered.
	code, message := errorOf(r.body, r.status, "request")
	return c.invalid(false, []TierFailure{{Tier: TierOnline, Code: code, Message: message}}), ""
}

// rememberValid makes the server's time the trusted time and caches the grace token
// (only one that verifies, and only next to a clock.json, without which it would count
// as tampered with).
func (c *Client) rememberValid(token, licenseID string, entitlements []Entitlement, serverTime any, save save) {
	if !c.trust.onlineAnswerAt(c.serverTime(serverTime), nil, save) {
		return
	}
	verifies := func() bool {
		_, err := offline.VerifyGraceToken(token, c.keys.keySet(), offline.GraceTokenOptions{Now: c.clock.Now(), HardwareID: c.cfg.hardwareID})
		return err == nil
	}
	// A token of a key the client does not know yet (a rotation since the last refresh)
	// asks for the key set once.
	if !verifies() && !(c.refreshForUnknownKey(kidOf(token)) && verifies()) {
		return
	}
	entry := &cachedGrace{Token: token, LicenseID: licenseID, Entitlements: entitlements, SavedAt: isoMillis(c.clock.Now())}
	save(func() error { return c.store.writeGrace(entry) })
}

// rememberInvalid keeps the verdict (memory and revoked.json) and purges the grace token.
func (c *Client) rememberInvalid(reason, message string, serverTime any, save save) {
	at := c.serverTime(serverTime)
	v := &verdict{Reason: reason, Message: message, ServerTime: isoOfMillis(at)}
	c.trust.onlineAnswerAt(at, v, save)
	if c.cfg.enabled {
		save(c.store.deleteGrace)
	}
}

func (c *Client) serverTime(value any) int64 {
	if t, ok := parseTime(value); ok {
		return t.UnixMilli()
	}
	return c.clock.Now().UnixMilli()
}

// fromLicenseFile is the .lic tier's answer, and the file's valid_until when it vouches.
func (c *Client) fromLicenseFile(now time.Time, failures *[]TierFailure, save save) (*Result, time.Time) {
	file := c.cfg.licenseFile
	data, err := os.ReadFile(file)
	if err != nil {
		*failures = append(*failures, TierFailure{Tier: TierLicenseFile, Code: "LICENSE_FILE_UNREADABLE", Message: fmt.Sprintf("cannot read %s: %s", file, describeFsError(err))})
		return nil, time.Time{}
	}
	machinePrivateKey, cached := c.machinePrivateKey()
	verified, err := firstBound(c.boundIDs(save), func(id string) (*offline.VerifiedLicenseFile, error) {
		return offline.VerifyLicenseFile(data, offline.VerifyOptions{Keys: c.keys.keySet(), HardwareID: id, MachinePrivateKey: machinePrivateKey, Now: now})
	})
	if cached {
		zero(machinePrivateKey)
	}
	if err != nil {
		*failures = append(*failures, failureOf(TierLicenseFile, err))
		return nil, time.Time{}
	}
	if verified.Payload.LicenseKeyPrefix != c.keyPrefix {
		*failures = append(*failures, TierFailure{Tier: TierLicenseFile, Code: "LICENSE_FILE_MISMATCH", Message: "the license file is for another license key"})
		return nil, time.Time{}
	}
	c.trust.advanceTo(verified.Payload.IssuedAt.UnixMilli(), save)
	return c.valid(TierLicenseFile, verified.Payload.Entitlements, verified.Payload.LicenseID, verified.DecryptionKey), verified.Payload.ValidUntil
}

func (c *Client) fromGraceToken(now time.Time, failures *[]TierFailure) *Result {
	cached := c.store.readGrace()
	if cached == nil {
		*failures = append(*failures, TierFailure{Tier: TierGraceToken, Code: "NO_GRACE_TOKEN", Message: "no usable grace token is cached"})
		return nil
	}
	verified, err := c.verifyCachedGrace(cached.Token, now)
	if err != nil {
		*failures = append(*failures, failureOf(TierGraceToken, err))
		return nil
	}
	if verified.Claims.LicenseKeyPrefix != c.keyPrefix {
		*failures = append(*failures, TierFailure{Tier: TierGraceToken, Code: "GRACE_TOKEN_MISMATCH", Message: "the cached grace token is for another license key"})
		return nil
	}
	c.scheduleGraceExpiry(verified.Claims.ExpiresAt())
	return c.valid(TierGraceToken, verified.Claims.Entitlements, verified.Claims.LicenseID, nil)
}

// verifyCachedGrace verifies the cached token for this machine's IDs (boundIDs).
func (c *Client) verifyCachedGrace(token string, now time.Time) (*offline.VerifiedGraceToken, error) {
	return firstBound(c.boundIDs(quietSave), func(id string) (*offline.VerifiedGraceToken, error) {
		return offline.VerifyGraceToken(token, c.keys.keySet(), offline.GraceTokenOptions{Now: now, HardwareID: id})
	})
}

func (c *Client) remainingGrace(now time.Time) time.Duration {
	cached := c.store.readGrace()
	if cached == nil {
		return 0
	}
	verified, err := c.verifyCachedGrace(cached.Token, now)
	if err != nil {
		return 0
	}
	if remaining := verified.Claims.ExpiresAt().Sub(now); remaining > 0 {
		return remaining
	}
	return 0
}

// scheduleRetry arms the next reconnection attempt: RetryInterval, doubling up to
// MaxRetryInterval, at most MaxRetryAttempts times (0: for ever).
func (c *Client) scheduleRetry() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.offline {
		return
	}
	if c.cfg.maxAttempts > 0 && c.retryAttempt >= c.cfg.maxAttempts {
		return
	}
	delay := c.cfg.retryInterval
	for i := 0; i < c.retryAttempt && delay < c.cfg.maxRetry; i++ {
		if delay > c.cfg.maxRetry/2 {
			// Doubling would pass the cap, and past 146 years overflow into a delay of 0.
			delay = c.cfg.maxRetry
			break
		}
		delay *= 2
	}
	if delay > c.cfg.maxRetry {
		delay = c.cfg.maxRetry
	}
	stop(&c.retryTimer)
	c.retryTimer = c.clock.AfterFunc(delay, c.retry)
}

func (c *Client) retry() {
	c.mu.Lock()
	c.retryTimer = nil
	if c.closed || !c.offline {
		c.mu.Unlock()
		return
	}
	c.retryAttempt++
	c.retrying = true
	c.mu.Unlock()
	// Outside runMu: a Validate meanwhile answers from the offline tiers at once instead of
	// waiting for this attempt, which may take RequestTimeout.
	r := c.askValidate(context.Background(), quietSave)
	var pending []func()
	func() {
		c.runMu.Lock()
		defer c.runMu.Unlock()
		c.mu.Lock()
		c.retrying = false
		// A Validate that brought the client back meanwhile had a newer answer than this one.
		stale := c.closed || !c.offline
		c.mu.Unlock()
		if stale {
			return
		}
		answered := false
		func() {
			defer func() { _ = recover() }() // a bug counts as unreachable: try again later
			// Nobody reads this answer: cache problems show in the next Validate result.
			result, _ := c.answerOf(r, (&cacheWarnings{}).save)
			answered = result != nil
		}()
		if answered {
			c.leaveOfflineMode(context.Background(), &pending)
			return
		}
		c.noteFailedAttempt(r)
		c.scheduleRetry()
	}()
	for _, callback := range pending {
		callback()
	}
}

// scheduleLeaseRenewal validates again halfway through a floating lease, measured on the
// server's clock (lease end minus server time) and waited out as elapsed time.
func (c *Client) scheduleLeaseRenewal(leaseExpiresAt, serverTime any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stop(&c.leaseTimer)
	end, ok1 := parseTime(leaseExpiresAt)
	at, ok2 := parseTime(serverTime)
	if c.closed || !ok1 || !ok2 {
		return
	}
	delay := end.Sub(at) / 2
	if delay < time.Second {
		delay = time.Second
	}
	c.leaseTimer = c.clock.AfterFunc(delay, func() {
		c.mu.Lock()
		c.leaseTimer = nil
		run := !c.closed && !c.offline
		c.mu.Unlock()
		if run {
			c.Validate()
		}
	})
}

// scheduleGraceExpiry runs the chain again when the grace token in use (in ModeOffline,
// the .lic file) runs out: the server may be back, or the grace period is over.
func (c *Client) scheduleGraceExpiry(expiresAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stop(&c.graceTimer)
	c.graceTimer = c.clock.AfterFunc(expiresAt.Sub(c.clock.Now()), func() {
		c.mu.Lock()
		c.graceTimer = nil
		run := !c.closed && c.offline
		c.mu.Unlock()
		if run {
			c.Validate()
		}
	})
}

func (c *Client) leaveOfflineMode(ctx context.Context, pending *[]func()) {
	c.mu.Lock()
	if !c.offline {
		c.mu.Unlock()
		return
	}
	c.offline = false
	c.timedOutReason = ""
	// The lease timer stays: the answer that brought the client back online just set it.
	stop(&c.retryTimer)
	stop(&c.graceTimer)
	c.mu.Unlock()
	if callback := c.callbacks.OnOfflineModeExit; callback != nil {
		*pending = append(*pending, callback)
	}
	c.flushQueue(ctx)
}

func (c *Client) flushInBackground() {
	if !c.cfg.enabled {
		return
	}
	c.background.Add(1)
	go func() {
		defer c.background.Done()
		c.flushQueue(context.Background())
	}()
}

// flushQueue sends queued reports in order, each with its idempotency key; it stops at
// the first that cannot reach the server, or that is not counted because this machine holds
// no seat now (SEAT_REQUIRED: it waits for the next valid online validation). A report the
// server refuses for good is set aside in rejected/.
func (c *Client) flushQueue(ctx context.Context) {
	if !c.cfg.enabled {
		return
	}
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	for _, item := range c.store.queued() {
		if c.isClosed() {
			return
		}
		r := c.sendUsage(ctx, item.report)
		if r.unreachable {
			return
		}
		if code, _ := errorOf(r.body, r.status, "report"); r.status == 422 && code == "SEAT_REQUIRED" {
			return
		}
		if r.status == 200 || r.status == 201 {
			_ = c.store.dequeue(item.path)
		} else {
			c.store.setAside(item.path)
		}
	}
}

func (c *Client) sendUsage(ctx context.Context, report map[string]json.RawMessage) reply {
	body := map[string]json.RawMessage{}
	body["license_key"], _ = json.Marshal(c.cfg.licenseKey)
	body["hardware_id"], _ = json.Marshal(c.cfg.hardwareID)
	for name, value := range report {
		body[name] = value
	}
	return c.postJSON(ctx, "/api/v1/usage", body)
}

func (c *Client) valid(source Tier, entitlements []Entitlement, licenseID string, decryptionKey []byte) *Result {
	codes := map[string]bool{}
	for _, e := range entitlements {
		codes[e.Code] = true
	}
	return &Result{
		Valid:         true,
		IsOffline:     source != TierOnline,
		Source:        source,
		DecryptionKey: decryptionKey,
		LicenseID:     licenseID,
		Entitlements:  entitlements,
		Failures:      []TierFailure{},
		Warnings:      []Warning{},
		codes:         codes,
		restricted:    c.cfg.restricted,
	}
}

func (c *Client) invalid(isOffline bool, failures []TierFailure) *Result {
	list := append([]TierFailure(nil), failures...)
	reason := ""
	if len(list) > 0 {
		reason = list[len(list)-1].Code
	}
	return &Result{IsOffline: isOffline, Entitlements: []Entitlement{}, Reason: reason, Failures: list, Warnings: []Warning{}}
}

func failureOf(tier Tier, err error) TierFailure {
	if e, ok := err.(*offline.Error); ok {
		return TierFailure{Tier: tier, Code: e.Code, Message: e.Message}
	}
	return TierFailure{Tier: tier, Code: "INTERNAL", Message: err.Error()}
}

func hasCode(failures []TierFailure, code string) bool {
	for _, f := range failures {
		if f.Code == code {
			return true
		}
	}
	return false
}

// integerOf reads a JSON number that is an integer; nil for null or anything else.
func integerOf(value any) *int64 {
	f, ok := value.(float64)
	if !ok || f != float64(int64(f)) {
		return nil
	}
	n := int64(f)
	return &n
}

// cacheWarnings collects the warnings of one validation: each distinct cache failure once.
type cacheWarnings struct{ list []Warning }

func (w *cacheWarnings) save(write func() error) bool {
	err := write()
	if err == nil {
		return true
	}
	for _, existing := range w.list {
		if existing.Message == err.Error() {
			return false
		}
	}
	w.list = append(w.list, Warning{Code: "CACHE_NOT_WRITTEN", Message: err.Error()})
	return false
}
