package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"licenseserver.example/client/offline"
)

// The cache directory (docs/client.md "The cache directory"): one 0700 directory per
// license key under CacheDir, with grace.json, clock.json, revoked.json, keys.json,
// hardware-id.json (previous.go), queue/ and rejected/, in the same layout and JSON as the Node client's. Every file is written
// whole (.partial, fsync, rename, fsync of the directory) and is 0600. Writes return a
// *cacheWriteError; reads never fail.

type cachedGrace struct {
	Token        string                `json:"token"`
	LicenseID    string                `json:"license_id"`
	Entitlements []offline.Entitlement `json:"entitlements"`
	SavedAt      string                `json:"saved_at"`
}

// verdict is the server's authoritative "not valid" (docs/client.md "Revocation").
type verdict struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// ServerTime is the server's time of the answer, RFC 3339.
	ServerTime string `json:"server_time"`
}

type clockKind int

const (
	clockMissing clockKind = iota
	clockTrusted
	clockDamaged
)

// clockRecord is what clock.json says.
type clockRecord struct {
	kind    clockKind
	latest  int64 // ms since the epoch
	revoked *verdict
	why     string
}

// verdictRecord is what revoked.json says: nothing, a verdict, or damaged.
type verdictRecord struct {
	verdict *verdict
	damaged bool
}

func (v verdictRecord) present() bool { return v.verdict != nil || v.damaged }

type queuedUsage struct {
	EntitlementCode string `json:"entitlement_code"`
	Quantity        int64  `json:"quantity"`
	OccurredAt      string `json:"occurred_at"`
	IdempotencyKey  string `json:"idempotency_key"`
}

type queuedFile struct {
	path string
	// report is the file's JSON object, sent as it is.
	report map[string]json.RawMessage
}

// cacheWriteError is a cache file that could not be written; the client reports it as a
// warning, never as a failure.
type cacheWriteError struct{ message string }

func (e *cacheWriteError) Error() string { return e.message }

type store struct {
	dir      string
	queueDir string
}

func newStore(cacheDir, licenseKey string) *store {
	dir := filepath.Join(cacheDir, cacheID(licenseKey))
	return &store{dir: dir, queueDir: filepath.Join(dir, "queue")}
}

func (s *store) file(name string) string { return filepath.Join(s.dir, name) }

// readGrace returns nil for a grace.json that is missing or does not parse: without a
// token the tier refuses anyway.
func (s *store) readGrace() *cachedGrace {
	object, kind, _ := s.readJSON("grace.json")
	if kind != clockTrusted {
		return nil
	}
	token, ok1 := object.Values["token"].(string)
	licenseID, ok2 := object.Values["license_id"].(string)
	list, ok3 := object.Values["entitlements"].([]any)
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	savedAt, _ := object.Values["saved_at"].(string)
	return &cachedGrace{Token: token, LicenseID: licenseID, Entitlements: offline.EntitlementsOf(list), SavedAt: savedAt}
}

func (s *store) writeGrace(entry *cachedGrace) error { return s.writeJSON("grace.json", entry) }
func (s *store) deleteGrace() error                  { return s.delete("grace.json") }

func (s *store) readClock() clockRecord {
	object, kind, why := s.readJSON("clock.json")
	if kind != clockTrusted {
		return clockRecord{kind: kind, why: why}
	}
	latest, ok := object.Values["latest"].(float64)
	if !ok || latest != latest || latest > 1e300 || latest < -1e300 {
		return clockRecord{kind: clockDamaged, why: "it holds no time"}
	}
	return clockRecord{kind: clockTrusted, latest: int64(latest), revoked: verdictOf(object.Values["revoked"])}
}

func (s *store) writeClock(latest int64, revoked *verdict) error {
	if revoked != nil {
		return s.writeJSON("clock.json", struct {
			Latest  int64    `json:"latest"`
			Revoked *verdict `json:"revoked"`
		}{latest, revoked})
	}
	return s.writeJSON("clock.json", struct {
		Latest int64 `json:"latest"`
	}{latest})
}

func (s *store) readVerdict() verdictRecord {
	object, kind, _ := s.readJSON("revoked.json")
	switch kind {
	case clockMissing:
		return verdictRecord{}
	case clockTrusted:
		if v := verdictOf(object); v != nil {
			return verdictRecord{verdict: v}
		}
	}
	return verdictRecord{damaged: true}
}

func (s *store) writeVerdict(v *verdict) error { return s.writeJSON("revoked.json", v) }
func (s *store) deleteVerdict() error          { return s.delete("revoked.json") }

// has reports whether a file is there at all, readable or not.
func (s *store) has(name string) bool {
	_, err := os.Stat(s.file(name))
	return err == nil || !isAbsence(err)
}

var queueSequence atomic.Int64

// enqueue appends a report; file names sort in the order the reports were made.
func (s *store) enqueue(report *queuedUsage) error {
	if err := makeDir(s.queueDir); err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339Nano, report.OccurredAt)
	if err != nil {
		at = time.Now()
	}
	// A per-process sequence after the time keeps reports of one millisecond in order.
	sequence := time.Now().UnixNano()
	for {
		last := queueSequence.Load()
		if sequence <= last {
			sequence = last + 1
		}
		if queueSequence.CompareAndSwap(last, sequence) {
			break
		}
	}
	name := fmt.Sprintf("%015d-%020d-%s.json", at.UnixMilli(), sequence, newUUID())
	data, _ := json.Marshal(report)
	return writeFileDurably(filepath.Join(s.queueDir, name), data, false)
}

// queued returns the queue in order; a file that cannot be read back is set aside.
func (s *store) queued() []queuedFile {
	entries, err := os.ReadDir(s.queueDir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var out []queuedFile
	for _, name := range names {
		path := filepath.Join(s.queueDir, name)
		data, err := os.ReadFile(path)
		var report map[string]json.RawMessage
		if err == nil {
			err = json.Unmarshal(data, &report)
		}
		if err != nil || report == nil {
			s.setAside(path)
			continue
		}
		out = append(out, queuedFile{path: path, report: report})
	}
	return out
}

// queueLength is how many reports wait in the queue.
func (s *store) queueLength() int {
	entries, _ := os.ReadDir(s.queueDir)
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			n++
		}
	}
	return n
}

func (s *store) dequeue(path string) error {
	if err := os.Remove(path); err != nil && !isAbsence(err) {
		return err
	}
	return nil
}

// setAside keeps a report the server refused for good (e.g. over its limit) in rejected/
// for the operator to see.
func (s *store) setAside(path string) {
	rejected := filepath.Join(s.dir, "rejected")
	if err := os.MkdirAll(rejected, 0o700); err == nil {
		if err := os.Rename(path, filepath.Join(rejected, filepath.Base(path))); err == nil {
			return
		}
	}
	_ = os.Remove(path)
}

// readJSON reads a state file: kind is clockTrusted for a JSON object, clockMissing for
// no file, clockDamaged (with why) for anything else.
func (s *store) readJSON(name string) (*offline.Object, clockKind, string) {
	data, err := os.ReadFile(s.file(name))
	if err != nil {
		if isAbsence(err) {
			return nil, clockMissing, ""
		}
		return nil, clockDamaged, describeFsError(err)
	}
	data = bytes.TrimPrefix([]byte(strings.ToValidUTF8(string(data), "\uFFFD")), []byte("\uFEFF"))
	value, _, _, err := offline.ParseJSON(data)
	if err != nil {
		return nil, clockDamaged, "it is not JSON"
	}
	object, ok := value.(*offline.Object)
	if !ok {
		return nil, clockDamaged, "it is not a JSON object"
	}
	return object, clockTrusted, ""
}

func (s *store) writeJSON(name string, value any) error {
	if err := makeDir(s.dir); err != nil {
		return err
	}
	var b bytes.Buffer
	encoder := json.NewEncoder(&b)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(value); err != nil {
		return &cacheWriteError{message: fmt.Sprintf("cannot write %s: %s", s.file(name), err.Error())}
	}
	return writeFileDurably(s.file(name), bytes.TrimSuffix(b.Bytes(), []byte("\n")), true)
}

func (s *store) delete(name string) error {
	if err := os.Remove(s.file(name)); err != nil && !isAbsence(err) {
		return &cacheWriteError{message: fmt.Sprintf("cannot remove %s: %s", s.file(name), describeFsError(err))}
	}
	return nil
}

func makeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return &cacheWriteError{message: fmt.Sprintf("cannot create the cache directory %s: %s", dir, describeFsError(err))}
	}
	return nil
}

// writeFileDurably writes data so that target is either absent, the old file, or the
// complete new one, and is on the device when it returns: target.partial, fsync, rename,
// fsync of the directory. Without overwrite an existing target is an error.
func writeFileDurably(target string, data []byte, overwrite bool) error {
	partial := target + ".partial"
	failed := func(err error) error {
		_ = os.Remove(partial)
		return &cacheWriteError{message: fmt.Sprintf("cannot write %s: %s", target, describeFsError(err))}
	}
	exists := func() bool { _, err := os.Stat(target); return err == nil }
	if !overwrite && exists() {
		return &cacheWriteError{message: target + " already exists"}
	}
	f, err := os.OpenFile(partial, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return failed(err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return failed(err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return failed(err)
	}
	if err := f.Close(); err != nil {
		return failed(err)
	}
	if !overwrite && exists() {
		_ = os.Remove(partial)
		return &cacheWriteError{message: target + " already exists"}
	}
	if err := os.Rename(partial, target); err != nil {
		return failed(err)
	}
	if d, err := os.Open(filepath.Dir(target)); err == nil {
		_ = d.Sync() // not supported everywhere (e.g. Windows); the rename stands
		d.Close()
	}
	return nil
}

// isAbsence: no file, or a parent that is not a directory (so nothing was ever written).
func isAbsence(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// describeFsError is a short reason for a failed file operation, as the Node client's.
func describeFsError(err error) string {
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, syscall.EISDIR):
		return "is a directory"
	case errors.Is(err, syscall.ENOTDIR):
		return "a parent is not a directory"
	case errors.Is(err, syscall.ENOSPC):
		return "no space left on the device"
	case errors.Is(err, syscall.EROFS):
		return "read-only file system"
	}
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Err.Error()
	}
	return err.Error()
}

func verdictOf(value any) *verdict {
	o, ok := value.(*offline.Object)
	if !ok {
		return nil
	}
	reason, ok1 := o.Values["reason"].(string)
	message, ok2 := o.Values["message"].(string)
	serverTime, ok3 := o.Values["server_time"].(string)
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	return &verdict{Reason: reason, Message: message, ServerTime: serverTime}
}
