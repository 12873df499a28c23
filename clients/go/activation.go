package client

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf16"

	"licenseserver.example/client/offline"
)

// Activation by request file (docs/client.md, "Activation by request file"): the machine
// makes a request, the operator checks the license out with it (license checkout
// --request), the machine installs the file after checking that it answers its request.
// The Node client keeps the same files in the same cache directory.

// machineKeyPair makes a request's X25519 key pair (private, public: 32 bytes each). Go
// 1.19's standard library has no X25519: this is offline.GenerateX25519 (x25519.go). A
// variable, so that a build may swap it; nil, CreateActivationRequest says so.
var machineKeyPair func() (private, public []byte, err error) = offline.GenerateX25519

// supersededKept is how many replaced requests pending-request.json remembers.
const supersededKept = 10

// ActivationRequestOptions are CreateActivationRequest's options; all may be left zero.
type ActivationRequestOptions struct {
	// MachineName is shown to the operator and recorded as the machine's name (default: the host name).
	MachineName string
	// AppVersion is recorded as the machine's client version (default: Config.Version).
	AppVersion string
	// ReturnPending: write nothing to the cache directory; the private key and nonce come
	// back as Pending, for the application to keep as secretly as the cache would, and to
	// hand to InstallLicenseFile. Default: they are kept in pending-request.json (0600).
	ReturnPending bool
}

// PendingActivationRequest is what the machine keeps of a request until its file is
// installed. PrivateKey is secret.
type PendingActivationRequest struct {
	Nonce      string
	MachineKey string
	// PrivateKey is the unpadded base64url of the 32-byte X25519 private key.
	PrivateKey string
	HardwareID string
	CreatedAt  string
}

// ActivationRequestResult is a request made.
type ActivationRequestResult struct {
	// Text is the request file's text: carry it to the operator (it holds no secret).
	Text    string
	Request *offline.ActivationRequest
	// Pending is set only with ReturnPending.
	Pending *PendingActivationRequest
}

// InstallResult is a file installed.
type InstallResult struct {
	// File is where the file was put (OfflineConfig.LicenseFile).
	File         string
	LicenseID    string
	ValidUntil   time.Time
	HardwareID   string
	RequestNonce string
}

// pendingRecord is pending-request.json, as the Node client writes it.
type pendingRecord struct {
	Nonce      string             `json:"nonce"`
	MachineKey string             `json:"machine_key"`
	PrivateKey string             `json:"private_key"`
	HardwareID string             `json:"hardware_id"`
	CreatedAt  string             `json:"created_at"`
	Superseded []supersededRecord `json:"superseded"`
}

type supersededRecord struct {
	Nonce     string `json:"nonce"`
	CreatedAt string `json:"created_at"`
}

// machineKeyRecord is machine-key.json: the key pair of the request whose file is installed.
type machineKeyRecord struct {
	RequestNonce string `json:"request_nonce"`
	MachineKey   string `json:"machine_key"`
	PrivateKey   string `json:"private_key"`
	HardwareID   string `json:"hardware_id"`
	InstalledAt  string `json:"installed_at"`
}

func clientError(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CreateActivationRequest makes an activation request for this machine. Its errors are
// *Error (CACHE_NOT_WRITTEN, ACTIVATION_REQUEST_MALFORMED for a MachineName or AppVersion
// the format does not take, X25519_UNAVAILABLE in a build without X25519) or *ConfigError.
func (c *Client) CreateActivationRequest(opts ActivationRequestOptions) (*ActivationRequestResult, error) {
	if !opts.ReturnPending && c.cfg.cacheDir == "" {
		return nil, &ConfigError{Message: "CreateActivationRequest needs a cache directory: set Offline.CacheDir, or ReturnPending"}
	}
	if machineKeyPair == nil {
		return nil, clientError("X25519_UNAVAILABLE", "this build has no X25519 (offline.GenerateX25519) to make a machine key with")
	}
	private, public, err := machineKeyPair()
	if err != nil {
		return nil, clientError("INTERNAL", "cannot make a machine key: %s", err.Error())
	}
	nonce := make([]byte, offline.RequestNonceBytes)
	if _, err := rand.Read(nonce); err != nil {
		return nil, clientError("INTERNAL", "cannot read random bytes: %s", err.Error())
	}
	key := c.cfg.licenseKey
	canonical := normalizeLicenseKey(key)
	if canonical == "" {
		canonical = trimJS(key)
	}
	name := opts.MachineName
	if name == "" {
		name = defaultMachineName()
	}
	version := opts.AppVersion
	if version == "" {
		version = truncateUTF16(c.cfg.version, offline.MaxAppVersionLength)
	}
	request := &offline.ActivationRequest{
		LicenseKeyPrefix: licenseKeyPrefix(key),
		LicenseKeyDigest: offline.LicenseKeyDigest(canonical),
		HardwareID:       c.cfg.hardwareID,
		// The server moves the machine's record (and seat) from its hw1 ID, as a validation does.
		PreviousHardwareID: c.previousHardwareID(quietSave),
		MachineName:        name,
		AppVersion:         version,
		MachineKey:         base64.RawURLEncoding.EncodeToString(public),
		Nonce:              base64.RawURLEncoding.EncodeToString(nonce),
		CreatedAt:          c.clock.Now().UTC().Truncate(time.Second).Format("2006-01-02T15:04:05Z"),
	}
	text, err := offline.EncodeActivationRequest(request)
	if err != nil {
		return nil, err
	}
	pending := &PendingActivationRequest{
		Nonce:      request.Nonce,
		MachineKey: request.MachineKey,
		PrivateKey: base64.RawURLEncoding.EncodeToString(private),
		HardwareID: request.HardwareID,
		CreatedAt:  request.CreatedAt,
	}
	zero(private)
	if opts.ReturnPending {
		return &ActivationRequestResult{Text: text, Request: request, Pending: pending}, nil
	}
	record := pendingRecord{Nonce: pending.Nonce, MachineKey: pending.MachineKey, PrivateKey: pending.PrivateKey, HardwareID: pending.HardwareID, CreatedAt: pending.CreatedAt, Superseded: []supersededRecord{}}
	if previous := c.store.readPendingRequest(); previous != nil {
		record.Superseded = append([]supersededRecord{{Nonce: previous.Nonce, CreatedAt: previous.CreatedAt}}, previous.Superseded...)
		if len(record.Superseded) > supersededKept {
			record.Superseded = record.Superseded[:supersededKept]
		}
	}
	if err := c.store.writeJSON("pending-request.json", record); err != nil {
		return nil, clientError("CACHE_NOT_WRITTEN", "the request was not kept: %s", err.Error())
	}
	return &ActivationRequestResult{Text: text, Request: request}, nil
}

// InstallLicenseFile puts a file answering this machine's pending request at
// OfflineConfig.LicenseFile, after checking it as validation will (signature, window,
// license key) and that it answers that request: bound to this machine's hardware ID and
// carrying the request's nonce (LICENSE_FILE_WRONG_REQUEST otherwise, naming what
// differs). pending is the request the application kept (ReturnPending), or nil for the
// cache's. The file is written .partial, fsynced and renamed; then the pending request is
// forgotten and its key pair kept as machine-key.json. Errors are *Error or *ConfigError.
func (c *Client) InstallLicenseFile(file []byte, pending *PendingActivationRequest) (*InstallResult, error) {
	keys := c.keys.keySet()
	if c.cfg.licenseFile == "" || len(keys) == 0 {
		return nil, &ConfigError{Message: "InstallLicenseFile needs Offline.LicenseFile (where the file goes) and Offline.PublicKey (to check it)"}
	}
	now := c.clock.Now()
	checked, err := offline.VerifyLicenseFile(file, offline.VerifyOptions{Keys: keys, SkipHardwareCheck: true, Now: now})
	if err != nil {
		return nil, err
	}
	payload := checked.Payload
	if payload.LicenseKeyPrefix != c.keyPrefix {
		return nil, clientError("LICENSE_FILE_MISMATCH", "the license file is for another license key (%s...)", payload.LicenseKeyPrefix)
	}
	if payload.HardwareID == "" {
		return nil, clientError("LICENSE_FILE_WRONG_REQUEST", "the license file is not bound to a machine, so it answers no activation request of this machine")
	}
	if payload.HardwareID != c.cfg.hardwareID {
		return nil, clientError("LICENSE_FILE_WRONG_REQUEST", "the license file is for another machine: it is bound to hardware ID %s, this machine's is %s", offline.Quote(payload.HardwareID), offline.Quote(c.cfg.hardwareID))
	}
	var record *pendingRecord
	var installed *machineKeyRecord
	if pending != nil {
		record = &pendingRecord{Nonce: pending.Nonce, MachineKey: pending.MachineKey, PrivateKey: pending.PrivateKey, HardwareID: pending.HardwareID, CreatedAt: pending.CreatedAt}
	} else {
		record = c.store.readPendingRequest()
		installed = c.store.readMachineKey()
	}
	nonce := payload.RequestNonce
	answersPending := record != nil && nonce == record.Nonce
	answersInstalled := !answersPending && installed != nil && nonce != "" && nonce == installed.RequestNonce
	if !answersPending && !answersInstalled {
		return nil, clientError("LICENSE_FILE_WRONG_REQUEST", "%s", wrongRequest(nonce, record))
	}
	// A machine-key file's key opens with the private key of the request it answers.
	privateKeyText := ""
	if answersPending {
		privateKeyText = record.PrivateKey
	} else {
		privateKeyText = installed.PrivateKey
	}
	machinePrivateKey, _ := base64.RawURLEncoding.Strict().DecodeString(privateKeyText)
	verified, err := offline.VerifyLicenseFile(file, offline.VerifyOptions{Keys: keys, HardwareID: c.cfg.hardwareID, MachinePrivateKey: machinePrivateKey, Now: now})
	zero(machinePrivateKey)
	if err != nil {
		return nil, err
	}
	zero(verified.DecryptionKey)
	if err := writeFileDurably(c.cfg.licenseFile, file, true); err != nil {
		return nil, clientError("LICENSE_FILE_NOT_WRITTEN", "%s", err.Error())
	}
	// The application that kept the pending request keeps its key pair too: nothing goes to the cache.
	if answersPending && pending == nil {
		kept := machineKeyRecord{RequestNonce: record.Nonce, MachineKey: record.MachineKey, PrivateKey: record.PrivateKey, HardwareID: record.HardwareID, InstalledAt: isoMillis(now)}
		if err := c.store.writeJSON("machine-key.json", kept); err != nil {
			return nil, clientError("CACHE_NOT_WRITTEN", "the file is installed, but the machine key of its request was not kept: %s", err.Error())
		}
		if err := c.store.delete("pending-request.json"); err != nil {
			return nil, clientError("CACHE_NOT_WRITTEN", "the file is installed, but the pending request was not forgotten: %s", err.Error())
		}
	}
	return &InstallResult{File: c.cfg.licenseFile, LicenseID: payload.LicenseID, ValidUntil: payload.ValidUntil, HardwareID: payload.HardwareID, RequestNonce: nonce}, nil
}

func wrongRequest(nonce string, pending *pendingRecord) string {
	waiting := "no activation request is pending on this machine"
	if pending != nil {
		waiting = fmt.Sprintf("this machine's pending request is %s, made at %s", pending.Nonce, pending.CreatedAt)
	}
	if nonce == "" {
		return "the license file was not made from an activation request (it has no request_nonce); " + waiting
	}
	if pending != nil {
		for _, older := range pending.Superseded {
			if older.Nonce == nonce {
				return fmt.Sprintf("the license file answers an older request of this machine (%s, made at %s), replaced since: %s; check that one out", nonce, older.CreatedAt, waiting)
			}
		}
	}
	return fmt.Sprintf("the license file answers another activation request (%s), not this machine's: %s", nonce, waiting)
}

// readPendingRequest is pending-request.json, or nil when there is none (or it cannot be read as one).
func (s *store) readPendingRequest() *pendingRecord {
	object, kind, _ := s.readJSON("pending-request.json")
	if kind != clockTrusted {
		return nil
	}
	str := func(name string) (string, bool) { v, ok := object.Values[name].(string); return v, ok }
	record := &pendingRecord{}
	var ok [5]bool
	record.Nonce, ok[0] = str("nonce")
	record.MachineKey, ok[1] = str("machine_key")
	record.PrivateKey, ok[2] = str("private_key")
	record.HardwareID, ok[3] = str("hardware_id")
	record.CreatedAt, ok[4] = str("created_at")
	for _, present := range ok {
		if !present {
			return nil
		}
	}
	if list, isArray := object.Values["superseded"].([]any); isArray {
		for _, item := range list {
			entry, isObject := item.(*offline.Object)
			if !isObject {
				continue
			}
			nonce, nonceOK := entry.Values["nonce"].(string)
			createdAt, createdOK := entry.Values["created_at"].(string)
			if nonceOK && createdOK {
				record.Superseded = append(record.Superseded, supersededRecord{Nonce: nonce, CreatedAt: createdAt})
			}
		}
	}
	return record
}

// readMachineKey is machine-key.json, or nil.
func (s *store) readMachineKey() *machineKeyRecord {
	object, kind, _ := s.readJSON("machine-key.json")
	if kind != clockTrusted {
		return nil
	}
	values := make([]string, 5)
	for i, name := range []string{"request_nonce", "machine_key", "private_key", "hardware_id", "installed_at"} {
		v, ok := object.Values[name].(string)
		if !ok {
			return nil
		}
		values[i] = v
	}
	return &machineKeyRecord{RequestNonce: values[0], MachineKey: values[1], PrivateKey: values[2], HardwareID: values[3], InstalledAt: values[4]}
}

// defaultMachineName is the host name, made to fit a request.
func defaultMachineName() string {
	name, err := os.Hostname()
	if err != nil {
		return ""
	}
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return -1
		}
		return r
	}, name)
	return truncateUTF16(name, offline.MaxMachineNameLength)
}

// truncateUTF16 is s.slice(0, max) of JavaScript, at a whole character.
func truncateUTF16(s string, max int) string {
	units := utf16.Encode([]rune(s))
	if len(units) <= max {
		return s
	}
	return string(utf16.Decode(units[:max]))
}

// unsealOnlineForMachine opens an online answer's key sealed to a machine key (a
// machine-key license): with Offline.MachinePrivateKey, or the cache's private key whose
// public key the answer names, the installed request's (machine-key.json) or one checked out
// but not installed yet (pending-request.json). MACHINE_KEY_MISSING when none is this machine's.
func (c *Client) unsealOnlineForMachine(sealed, machineKey, licenseID string) ([]byte, error) {
	if len(c.cfg.machineKey) > 0 {
		return offline.UnsealForMachine(sealed, machineKey, licenseID, c.cfg.hardwareID, c.cfg.machineKey)
	}
	var candidates []string
	if c.cfg.cacheDir != "" {
		if record := c.store.readMachineKey(); record != nil {
			candidates = append(candidates, record.PrivateKey)
		}
		if record := c.store.readPendingRequest(); record != nil {
			candidates = append(candidates, record.PrivateKey)
		}
	}
	for _, text := range candidates {
		private, err := base64.RawURLEncoding.Strict().DecodeString(text)
		if err != nil || len(private) != offline.X25519KeyLength {
			continue
		}
		public, err := offline.X25519PublicKey(private)
		if err == nil && base64.RawURLEncoding.EncodeToString(public) == machineKey {
			key, err := offline.UnsealForMachine(sealed, machineKey, licenseID, c.cfg.hardwareID, private)
			zero(private)
			return key, err
		}
		zero(private)
	}
	return offline.UnsealForMachine(sealed, machineKey, licenseID, c.cfg.hardwareID, nil)
}

// machinePrivateKey is the key that opens a machine-key file's decryption key:
// Offline.MachinePrivateKey, or else the private key of the request whose file is installed
// (machine-key.json, written by InstallLicenseFile); cached says it was read from there (a
// copy the caller zeroes). nil when there is neither.
func (c *Client) machinePrivateKey() (key []byte, cached bool) {
	if len(c.cfg.machineKey) > 0 {
		return c.cfg.machineKey, false
	}
	if c.cfg.cacheDir == "" {
		return nil, false
	}
	record := c.store.readMachineKey()
	if record == nil {
		return nil, false
	}
	key, err := base64.RawURLEncoding.Strict().DecodeString(record.PrivateKey)
	if err != nil || len(key) != offline.X25519KeyLength {
		return nil, false
	}
	return key, true
}
