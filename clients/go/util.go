package client

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// newUUID is a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// isoMillis is JavaScript's Date.prototype.toISOString: UTC with milliseconds.
func isoMillis(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func isoOfMillis(ms int64) string { return isoMillis(time.UnixMilli(ms)) }

// parseTime reads an RFC 3339 timestamp (fraction optional), as Date.parse does for the
// server's timestamps.
func parseTime(value any) (time.Time, bool) {
	s, ok := value.(string)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// zero overwrites a secret that is no longer needed.
func zero(secret []byte) {
	for i := range secret {
		secret[i] = 0
	}
}
