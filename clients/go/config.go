package client

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"

	"licenseserver.example/client/hardwareid"
	"licenseserver.example/client/offline"
)

// Config is the client's configuration, with the spec's field names (sections 2.5 and
// 2.6). Zero values mean the defaults.
type Config struct {
	// ServerAddr is host:port of the license server ([::1]:8080 for IPv6). Required online;
	// "" with Offline.Enabled is an air-gapped machine (ModeOffline).
	ServerAddr string
	// Mode is ModeOnline (the default) or ModeOffline; "" is ModeOffline when ServerAddr
	// is "" and ModeOnline otherwise.
	Mode Mode
	// HTTPS talks HTTPS to the server (default HTTP).
	HTTPS bool
	// LicenseKey is the license key. Required.
	LicenseKey string
	// Version is the application's version, sent with each validation. Required.
	Version string
	// HardwareID is a custom hardware ID (no control characters, in Unicode NFC, 1-256
	// bytes of UTF-8); "" derives one from the machine (package hardwareid).
	HardwareID string
	// RequestTimeout is how long a call to the server may take before the server counts
	// as unreachable (default 10 s).
	RequestTimeout time.Duration
	// ConnectTimeout is how long the connection (TCP, then the TLS handshake with HTTPS)
	// may take to come up before the server counts as unreachable (default 3 s, at most
	// RequestTimeout), so that a black-holed server costs this and not RequestTimeout. It
	// applies to the client's own transport only: with HTTPClient, set its transport's
	// dialer Timeout and TLSHandshakeTimeout instead.
	ConnectTimeout time.Duration
	Offline        OfflineConfig

	// OnOfflineModeEnter is called when the client goes offline, with the grace period
	// left: 0 without a usable grace token, and 0 when the offline tiers are refused
	// (LICENSE_REVOKED, CLOCK_UNTRUSTED, CLOCK_ROLLBACK).
	OnOfflineModeEnter func(remaining time.Duration)
	// OnOfflineModeExit is called when the server answers again.
	OnOfflineModeExit func()
	// OnGracePeriodExpired is called when no offline tier can vouch for the license any
	// more because the grace token ran out; once, and again only after a valid online
	// answer. The application is expected to shut down gracefully.
	OnGracePeriodExpired func()

	// Clock replaces the system clock (for tests).
	Clock Clock
	// HTTPClient replaces the default HTTP client (e.g. for a private CA). Its Timeout
	// is not used: RequestTimeout bounds each call. ConnectTimeout does not apply to it.
	HTTPClient *http.Client
}

// Mode is how the client may reach the license server.
type Mode string

const (
	// ModeOnline asks the server first, then the offline tiers (with Offline.Enabled).
	ModeOnline Mode = "online"
	// ModeOffline is for an air-gapped machine: no network call at all, and the .lic file
	// is the authority (no grace token, no reconnect loop).
	ModeOffline Mode = "offline"
)

// OfflineConfig is the spec's offline configuration (section 2.6).
type OfflineConfig struct {
	// Enabled uses the .lic file and the grace token when the server is unreachable.
	Enabled bool
	// CacheDir is where the client keeps its state (grace token, trusted time,
	// revocation, usage queue); default DefaultCacheDir().
	CacheDir string
	// LicenseFile is the path of the .lic file; required when Enabled.
	LicenseFile string
	// PublicKey is the server's Ed25519 public key(s), required when Enabled: 32 raw key
	// bytes, the PEM of `license-server signing-key show` / GET /api/signing-key, or a key
	// set (PEM text of several blocks, as `signing-key show --all` prints it).
	PublicKey []byte
	// PublicKeys adds further keys, each in any form PublicKey takes (the Node client's
	// array form, e.g. the current and the next key as separate PEM files).
	PublicKeys [][]byte
	// RetryInterval is the first delay before retrying the server while offline
	// (default 30 s); it doubles up to MaxRetryInterval (default 5 min).
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
	// MaxRetryAttempts stops retrying after this many attempts; 0 retries for ever.
	MaxRetryAttempts int
	// RestrictedEntitlements are codes for which HasEntitlement answers false offline.
	RestrictedEntitlements []string
	// AllowOfflineUsageReporting queues usage reports while offline.
	AllowOfflineUsageReporting bool
	// KeyRefresh refreshes the key set from the server's public route (off by default;
	// see KeyRefreshConfig and docs/public-keys.md).
	KeyRefresh KeyRefreshConfig
	// MachinePrivateKey is the machine's 32-byte X25519 private key of the activation
	// request a machine-key file answers (docs/offline-license-format.md, "The machine-key
	// binding"), for an application that stores it itself. It opens the file's decryption
	// key, which nothing in the file opens. Without it the client takes the key
	// InstallLicenseFile kept in the cache directory (machine-key.json); with neither, that
	// key is refused (MACHINE_KEY_MISSING).
	MachinePrivateKey []byte
}

// ConfigError is the one error New returns: a configuration it cannot work with. The
// messages are the spec's where it has them ("license file path is required", "public
// key is required") and name the field otherwise.
type ConfigError struct{ Message string }

func (e *ConfigError) Error() string { return e.Message }

// DefaultCacheDir is license-server-client in the OS configuration directory, found as
// the Node client's defaultCacheDir finds it: $XDG_CONFIG_HOME when it is an absolute
// path, else ~/.config, on Linux and other Unixes; ~/Library/Application Support on
// macOS; %APPDATA% (else ~\AppData\Roaming) on Windows. The home directory is $HOME
// (%USERPROFILE% on Windows), else the user's entry in the password database.
func DefaultCacheDir() (string, error) {
	home := func() (string, error) {
		if runtime.GOOS == "windows" {
			if dir := os.Getenv("USERPROFILE"); dir != "" {
				return dir, nil
			}
		} else if dir := os.Getenv("HOME"); dir != "" {
			return dir, nil
		}
		u, err := user.Current()
		if err != nil {
			return "", err
		}
		if u.HomeDir == "" {
			return "", errors.New("the user has no home directory")
		}
		return u.HomeDir, nil
	}
	const name = "license-server-client"
	switch runtime.GOOS {
	case "windows":
		if dir := os.Getenv("APPDATA"); dir != "" {
			return filepath.Join(dir, name), nil
		}
		h, err := home()
		if err != nil {
			return "", err
		}
		return filepath.Join(h, "AppData", "Roaming", name), nil
	case "darwin", "ios":
		h, err := home()
		if err != nil {
			return "", err
		}
		return filepath.Join(h, "Library", "Application Support", name), nil
	}
	if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" && filepath.IsAbs(xdg) {
		return filepath.Join(xdg, name), nil
	}
	h, err := home()
	if err != nil {
		return "", err
	}
	return filepath.Join(h, ".config", name), nil
}

type resolved struct {
	mode Mode
	// baseURL is "" in ModeOffline: nothing may be sent anywhere.
	baseURL    string
	licenseKey string
	version    string
	hardwareID string
	// hardwareIDDerived is true when the ID was derived (Config.HardwareID was "").
	hardwareIDDerived bool
	requestTimeout    time.Duration
	connectTimeout    time.Duration
	enabled           bool
	cacheDir          string
	licenseFile       string
	keys              offline.KeySet
	retryInterval     time.Duration
	maxRetry          time.Duration
	maxAttempts       int
	restricted        map[string]bool
	offlineUsage      bool
	keyRefresh        KeyRefreshConfig
	machineKey        []byte
}

const jsSpaceClass = `\t\n\x{0B}\f\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}`

var (
	serverAddrPattern  = regexp.MustCompile(`^[^` + jsSpaceClass + `/:]+(:[0-9]{1,5})?$|^\[[0-9a-fA-F:]+\](:[0-9]{1,5})?$`)
	controlCharacters  = regexp.MustCompile(`[\x{0}-\x{1F}\x{7F}-\x{9F}]`)
	fingerprintPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

const badKey = `public key must be 32 raw Ed25519 bytes or a PEM "PUBLIC KEY", or a list of them`

func resolve(cfg *Config) (*resolved, error) {
	fail := func(format string, args ...any) (*resolved, error) {
		return nil, &ConfigError{Message: fmt.Sprintf(format, args...)}
	}
	if cfg.Mode != "" && cfg.Mode != ModeOnline && cfg.Mode != ModeOffline {
		return fail(`Mode must be "online" or "offline"`)
	}
	mode := cfg.Mode
	if mode == "" {
		mode = ModeOnline
		if cfg.ServerAddr == "" {
			mode = ModeOffline
		}
	}
	if mode == ModeOffline && !cfg.Offline.Enabled {
		if cfg.Mode == ModeOffline {
			return fail("offline mode needs Offline.Enabled: true")
		}
		// No server and no offline mode: the server address is what is missing.
		return fail("server address must be <host>:<port>")
	}
	if (cfg.ServerAddr != "" || mode == ModeOnline) && !serverAddrPattern.MatchString(cfg.ServerAddr) {
		return fail("server address must be <host>:<port>")
	}
	licenseKey := trimJS(cfg.LicenseKey)
	if licenseKey == "" {
		return fail("license key is required")
	}
	if cfg.Version == "" {
		return fail("version is required")
	}
	if cfg.HardwareID != "" {
		if message := checkHardwareID(cfg.HardwareID); message != "" {
			return fail("%s", message)
		}
	}
	o := cfg.Offline
	if o.Enabled && o.LicenseFile == "" {
		return fail("license file path is required")
	}
	if o.MachinePrivateKey != nil && len(o.MachinePrivateKey) != offline.X25519KeyLength {
		return fail("MachinePrivateKey must be the 32 bytes of an X25519 private key")
	}
	var parts [][]byte
	if len(o.PublicKey) > 0 {
		parts = append(parts, o.PublicKey)
	}
	parts = append(parts, o.PublicKeys...)
	if o.Enabled && len(parts) == 0 {
		return fail("public key is required")
	}
	var keys offline.KeySet
	if len(parts) > 0 {
		var err error
		if keys, err = offline.ParseKeySetFrom("Offline.PublicKey", parts...); err != nil {
			return fail("%s: %s", badKey, err.Error())
		}
	}
	duration := func(value, fallback time.Duration, name string) (time.Duration, error) {
		if value == 0 {
			return fallback, nil
		}
		if value < 0 {
			return 0, &ConfigError{Message: name + " must be a positive duration"}
		}
		return value, nil
	}
	retry, err := duration(o.RetryInterval, 30*time.Second, "RetryInterval")
	if err != nil {
		return nil, err
	}
	maxRetry, err := duration(o.MaxRetryInterval, 5*time.Minute, "MaxRetryInterval")
	if err != nil {
		return nil, err
	}
	if maxRetry < retry {
		return fail("MaxRetryInterval must not be less than RetryInterval")
	}
	if o.MaxRetryAttempts < 0 {
		return fail("MaxRetryAttempts must be a non-negative integer (0: unlimited)")
	}
	timeout, err := duration(cfg.RequestTimeout, 10*time.Second, "RequestTimeout")
	if err != nil {
		return nil, err
	}
	connectTimeout, err := duration(cfg.ConnectTimeout, 3*time.Second, "ConnectTimeout")
	if err != nil {
		return nil, err
	}
	if connectTimeout > timeout {
		connectTimeout = timeout
	}
	keyRefresh := o.KeyRefresh
	if keyRefresh.Interval < 0 {
		return fail("Offline.KeyRefresh.Interval must be a positive duration")
	}
	if keyRefresh.Interval == 0 {
		keyRefresh.Interval = 24 * time.Hour
	}
	for i, a := range keyRefresh.AllowKeys {
		fp := strings.ToLower(a.Fingerprint)
		if !offline.IsKeyID(a.KeyID) || !fingerprintPattern.MatchString(fp) || !strings.HasPrefix(fp, a.KeyID) {
			return fail("Offline.KeyRefresh.AllowKeys[%d] must be {KeyID: 16 hex digits, Fingerprint: the key's 64 hex digits, which begin with its key id}", i)
		}
	}
	// Without offline mode no key is ever used, so none is fetched or read.
	keyRefresh.Enabled = keyRefresh.Enabled && o.Enabled
	cacheDir := o.CacheDir
	if cacheDir == "" {
		dir, err := DefaultCacheDir()
		if err != nil && o.Enabled {
			return fail("cannot find the OS configuration directory (%s); set Offline.CacheDir", err.Error())
		}
		cacheDir = dir
	}
	restricted := map[string]bool{}
	for _, code := range o.RestrictedEntitlements {
		restricted[code] = true
	}
	scheme := "http"
	if cfg.HTTPS {
		scheme = "https"
	}
	hardwareID := cfg.HardwareID
	if hardwareID == "" {
		derived, err := hardwareid.Derive()
		if err != nil {
			return fail("cannot derive a hardware ID on this machine (%s); set HardwareID", err.Error())
		}
		hardwareID = derived
	}
	baseURL := scheme + "://" + cfg.ServerAddr
	if mode == ModeOffline {
		baseURL = ""
	}
	return &resolved{
		mode:              mode,
		baseURL:           baseURL,
		licenseKey:        licenseKey,
		version:           cfg.Version,
		hardwareID:        hardwareID,
		hardwareIDDerived: cfg.HardwareID == "",
		requestTimeout:    timeout,
		connectTimeout:    connectTimeout,
		enabled:           o.Enabled,
		cacheDir:          cacheDir,
		licenseFile:       o.LicenseFile,
		keys:              keys,
		retryInterval:     retry,
		maxRetry:          maxRetry,
		maxAttempts:       o.MaxRetryAttempts,
		restricted:        restricted,
		offlineUsage:      o.AllowOfflineUsageReporting,
		keyRefresh:        keyRefresh,
		machineKey:        append([]byte(nil), o.MachinePrivateKey...),
	}, nil
}

// checkHardwareID applies the server's rules for a hardware ID (parseHardwareId of the
// reference), except NFC normalisation: the ID must already be NFC.
func checkHardwareID(id string) string {
	if controlCharacters.MatchString(id) {
		return "HardwareID must not contain control characters"
	}
	if !utf8.ValidString(id) {
		return "HardwareID must be well-formed Unicode text"
	}
	if len(id) > offline.MaxHardwareIDLength {
		return fmt.Sprintf("HardwareID must be at most %d bytes of UTF-8, got %d", offline.MaxHardwareIDLength, len(id))
	}
	return ""
}
