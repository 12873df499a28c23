//go:build !linux

package client

import (
	"runtime"
	"testing"
)

// startBlackHole relies on how Linux treats a full accept queue (it drops the SYN); other
// systems may refuse or reset instead, which would make the tests pass for the wrong reason.
func startBlackHole(t *testing.T) string {
	t.Skip("the black hole needs Linux's listen backlog semantics, not " + runtime.GOOS)
	return ""
}
