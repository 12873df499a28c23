package client

import "licenseserver.example/client/offline"

// Entitlement is a licensed feature: Code, Name and UsageLimit (nil: no limit).
type Entitlement = offline.Entitlement

// Error is a failure with a code, returned by ReportUsage and Release: the server's error
// code (USAGE_LIMIT_EXCEEDED, ENTITLEMENT_NOT_FOUND, ...), SERVER_UNREACHABLE or
// CACHE_NOT_WRITTEN.
type Error = offline.Error

// Tier is a link of the validation chain.
type Tier string

// The tiers, in chain order.
const (
	TierOnline      Tier = "online"
	TierLicenseFile Tier = "license-file"
	TierGraceToken  Tier = "grace-token"
)

// TierFailure is why one tier could not vouch for the license.
type TierFailure struct {
	Tier    Tier
	Code    string
	Message string
}

// Warning is a problem that did not change the answer. The only code is
// CACHE_NOT_WRITTEN: a state file could not be written or removed.
type Warning struct {
	Code    string
	Message string
}

// Result is the answer of Validate (spec section 2.7).
type Result struct {
	// Valid says whether the license may be used.
	Valid bool
	// IsOffline is true when the .lic file or the grace token answered.
	IsOffline bool
	// Source is the tier that answered; "" when none did.
	Source Tier
	// DecryptionKey is the license's 32-byte key, when it has one (online, or from the
	// file), unsealed for this machine.
	DecryptionKey []byte
	// LicenseID and Entitlements are from the tier that answered.
	LicenseID    string
	Entitlements []Entitlement
	// Reason is why the license is not valid: the last failure's code.
	Reason string
	// Failures lists every tier's failure in chain order when no tier vouched.
	Failures []TierFailure
	// Warnings are problems that did not change the answer (CACHE_NOT_WRITTEN).
	Warnings []Warning

	codes      map[string]bool
	restricted map[string]bool
}

// HasEntitlement is true for a licensed code, except restricted codes while offline.
func (r *Result) HasEntitlement(code string) bool {
	return r.Valid && r.codes[code] && !(r.IsOffline && r.restricted[code])
}

// UsageResult is the answer of ReportUsage.
type UsageResult struct {
	// Accepted is true when the server counted the report now.
	Accepted bool
	// Queued is true when the report waits in the offline queue, to be sent (and counted
	// once) when the server is back.
	Queued bool
	// Remaining is what is left of the limit after the report; nil when the entitlement
	// has no limit, or the report was queued.
	Remaining *int64
}

// ReleaseResult is the answer of Release.
type ReleaseResult struct {
	// Released is true when this machine held a lease, now given up; false when it held
	// none, or the license is not floating.
	Released bool
	// SeatFreeAt is when the seat is free for another machine (RFC 3339): the end of the
	// grace token this machine was given, which a copy could still use until then. Empty
	// when the machine holds no seat.
	SeatFreeAt string
	Message    string
}
