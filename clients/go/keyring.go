package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"licenseserver.example/client/offline"
)

// KeyRefreshConfig is the optional refresh of the key set from the server's public route
// (GET /.well-known/jwks.json), so that files and grace tokens of a key made after the
// application was built verify. The keys of Offline.PublicKey stay trusted always; a
// fetched key is taken only when a trusted key endorsed it (transitively) or AllowKeys
// names it (docs/public-keys.md). Accepted keys are kept in keys.json in the cache
// directory and put through the same rule when read.
type KeyRefreshConfig struct {
	Enabled bool
	// Interval between refreshes (default 24 h). A grace token of a key the client does
	// not know also triggers one, at most once a minute.
	Interval time.Duration
	// AllowKeys are keys taken without an endorsement, by key id and SHA-256 fingerprint
	// (hex), as `license-server signing-key list` shows them.
	AllowKeys []offline.AllowedKey
}

// KeyRefreshResult is what RefreshKeys reports.
type KeyRefreshResult struct {
	// Fetched is true when a key set was fetched and read; false: Reason says why, and the
	// keys stay as they were.
	Fetched bool
	Reason  string
	// Trusted lists the key ids trusted now: the built-in ones, then those accepted.
	Trusted []string
	// Accepted lists the key ids of the fetched set the trust rule took.
	Accepted []string
	// Refused lists the key ids of the fetched set it did not take.
	Refused []string
}

// unknownKeyRefresh is the least time between two refreshes for a key id the client does not know.
const unknownKeyRefresh = time.Minute

// keyRing is the client's key set: the built-in keys and those a refresh accepted.
type keyRing struct {
	builtIn offline.KeySet
	cfg     KeyRefreshConfig
	// enabled is cfg.Enabled with offline mode on and a server to ask.
	enabled bool
	store   *store

	mu          sync.Mutex
	loaded      bool
	accepted    []offline.OfferedKey
	lastAttempt time.Time
	fetchedAt   time.Time
	// fetchMu makes fetches run one at a time.
	fetchMu sync.Mutex
}

type keysFile struct {
	FetchedAt string        `json:"fetched_at"`
	Keys      []offline.JWK `json:"keys"`
}

// keySet is the keys to verify with: the built-in ones, then the accepted ones.
func (k *keyRing) keySet() offline.KeySet {
	if !k.cfg.Enabled {
		return k.builtIn
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.loadLocked()
	set := append(offline.KeySet(nil), k.builtIn...)
	for _, a := range k.accepted {
		set = append(set, a.VerificationKey)
	}
	return set
}

// loadLocked reads keys.json once and puts its keys through the trust rule.
func (k *keyRing) loadLocked() {
	if k.loaded {
		return
	}
	k.loaded = true
	object, kind, _ := k.store.readJSON("keys.json")
	if kind != clockTrusted {
		return
	}
	var entries []offline.JWK
	if list, ok := object.Values["keys"].([]any); ok {
		for _, item := range list {
			if entry := offline.JWKOfValue(item); entry != nil {
				entries = append(entries, *entry)
			}
		}
	}
	k.accepted = offline.AcceptOfferedKeys(k.builtIn, offline.OfferedKeysOf(entries), k.cfg.AllowKeys)
	if at, ok := object.Values["fetched_at"].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
			k.fetchedAt = t
		}
	}
}

// due reports whether a refresh is due at now: none in this process within the interval,
// and keys.json not fetched within it either.
func (k *keyRing) due(now time.Time) bool {
	if !k.enabled {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.loadLocked()
	if !k.lastAttempt.IsZero() {
		return now.Sub(k.lastAttempt) >= k.cfg.Interval
	}
	if !k.fetchedAt.IsZero() && !now.Before(k.fetchedAt) && now.Sub(k.fetchedAt) < k.cfg.Interval {
		// A recent keys.json from an earlier run counts as this process's refresh.
		k.lastAttempt = k.fetchedAt
		return false
	}
	return true
}

func (k *keyRing) outcome(fetched bool, reason string, refused []string) *KeyRefreshResult {
	k.mu.Lock()
	defer k.mu.Unlock()
	result := &KeyRefreshResult{Fetched: fetched, Reason: reason, Refused: refused}
	for _, b := range k.builtIn {
		result.Trusted = append(result.Trusted, b.KeyID)
	}
	for _, a := range k.accepted {
		result.Trusted = append(result.Trusted, a.KeyID)
		result.Accepted = append(result.Accepted, a.KeyID)
	}
	return result
}

// RefreshKeys fetches the server's public key set now and takes what the trust rule
// allows (Offline.KeyRefresh). It never fails: a fetch that does not work returns
// Fetched false and its reason, and the keys stay as they were.
func (c *Client) RefreshKeys(ctx context.Context) *KeyRefreshResult {
	k := c.keys
	if !k.enabled {
		return k.outcome(false, "key refresh is off, or the client is in offline mode", nil)
	}
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	k.mu.Lock()
	k.loadLocked()
	started := c.clock.Now()
	k.lastAttempt = started
	k.mu.Unlock()
	data, reason := c.getRaw(ctx, "/.well-known/jwks.json")
	if reason != "" {
		return k.outcome(false, reason, nil)
	}
	offered, ok := offline.OfferedKeysOfJWKS(data)
	if !ok {
		return k.outcome(false, "the server answered no key set", nil)
	}
	accepted := offline.AcceptOfferedKeys(k.builtIn, offered, k.cfg.AllowKeys)
	k.mu.Lock()
	k.accepted = accepted
	k.fetchedAt = started
	k.mu.Unlock()
	file := keysFile{FetchedAt: isoMillis(started), Keys: []offline.JWK{}}
	trusted := map[string]bool{}
	for _, b := range k.builtIn {
		trusted[b.KeyID] = true
	}
	for _, a := range accepted {
		file.Keys = append(file.Keys, offline.JWKOf(a))
		trusted[a.KeyID] = true
	}
	// Kept in memory for this process when it cannot be written; the next start fetches again.
	_ = c.store.writeJSON("keys.json", file)
	var refused []string
	for _, o := range offered {
		if !trusted[o.KeyID] {
			refused = append(refused, o.KeyID)
		}
	}
	return k.outcome(true, "", refused)
}

// refreshForUnknownKey refreshes when keyID is a key id the client does not trust, at
// most once a minute; it reports whether keyID is trusted afterwards.
func (c *Client) refreshForUnknownKey(keyID string) bool {
	k := c.keys
	if !k.enabled || !offline.IsKeyID(keyID) {
		return false
	}
	for _, key := range k.keySet() {
		if key.KeyID == keyID {
			return false
		}
	}
	k.mu.Lock()
	recent := !k.lastAttempt.IsZero() && c.clock.Now().Sub(k.lastAttempt) < unknownKeyRefresh
	k.mu.Unlock()
	if recent {
		return false
	}
	for _, id := range c.RefreshKeys(context.Background()).Accepted {
		if id == keyID {
			return true
		}
	}
	return false
}

// getRaw is a GET of the server's JSON, classified as postJSON's calls are; reason is ""
// for a 200 answer.
func (c *Client) getRaw(ctx context.Context, path string) ([]byte, string) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.baseURL+path, nil)
	if err != nil {
		return nil, fmt.Sprintf("cannot reach the server (%s)", err.Error())
	}
	request.Header.Set("Accept", "application/json")
	response, err := c.http.Do(request)
	if err != nil {
		return nil, c.requestFailed(ctx, err).reason
	}
	defer response.Body.Close()
	data, err := io.ReadAll(io.LimitReader(response.Body, maxAnswer+1))
	if err != nil {
		return nil, "the answer was cut off"
	}
	if len(data) > maxAnswer {
		return nil, "the answer is larger than 1 MiB"
	}
	if response.StatusCode != http.StatusOK {
		return nil, fmt.Sprintf("the server answered no key set (HTTP %d)", response.StatusCode)
	}
	return data, ""
}

// kidOf is the kid of a JWS's protected header, or "": the member named exactly "kid", as
// the token's verifier reads it (encoding/json would take "KID" too).
func kidOf(token string) string {
	header, err := base64.RawURLEncoding.DecodeString(strings.SplitN(token, ".", 2)[0])
	if err != nil {
		return ""
	}
	value, _, _, err := offline.ParseJSON(header)
	fields, isObject := value.(*offline.Object)
	if err != nil || !isObject {
		return ""
	}
	kid, _ := fields.Values["kid"].(string)
	return kid
}
