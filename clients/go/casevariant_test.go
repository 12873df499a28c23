package client

import (
	"encoding/base64"
	"testing"
)

// The hints the client reads from a grace token without verifying it take the member named
// exactly as the verifier (offline.VerifyGraceToken) and the Node client read it, not a case
// variant (encoding/json matched "KID" and "HARDWARE_ID" too, the last one winning).
func TestTokenHintsReadMemberNamesExactly(t *testing.T) {
	part := func(json string) string { return base64.RawURLEncoding.EncodeToString([]byte(json)) }
	token := part(`{"alg":"EdDSA","typ":"JWT","kid":"21fe31dfa154a261","KID":"39f713d0a644253f"}`) + "." +
		part(`{"hardware_id":"hw2-mine","HARDWARE_ID":"hw2-other"}`) + "." + part("signature")
	if kid := kidOf(token); kid != "21fe31dfa154a261" {
		t.Errorf("kidOf: %q", kid)
	}
	if id := graceTokenHardwareID(token); id != "hw2-mine" {
		t.Errorf("graceTokenHardwareID: %q", id)
	}
	upperOnly := part(`{"KID":"39f713d0a644253f"}`) + "." + part(`{"Hardware_ID":"hw2-other"}`) + "." + part("signature")
	if kidOf(upperOnly) != "" || graceTokenHardwareID(upperOnly) != "" {
		t.Errorf("a case variant alone was read: %q %q", kidOf(upperOnly), graceTokenHardwareID(upperOnly))
	}
}
