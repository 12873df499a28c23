package client

import (
	"fmt"
	"time"
)

// ClockRollbackTolerance is how far the system clock may be behind the latest trusted
// time while offline before the offline tiers fail with CLOCK_ROLLBACK.
const ClockRollbackTolerance = 5 * time.Minute

// refusal is why the offline tiers may not answer at all.
type refusal struct {
	code    string // LICENSE_REVOKED, CLOCK_UNTRUSTED or CLOCK_ROLLBACK
	message string
}

// save runs one cache write and says whether it worked; a failure becomes a warning on
// the result, never a failed validation.
type save func(write func() error) bool

// offlineTrust is what the offline tiers rely on besides the signed files: the latest time
// the client has reason to trust, and the server's last authoritative verdict
// (docs/client.md "Revocation" and "Clock rollback"). Both live in memory and in the cache
// (clock.json, revoked.json), so they hold across restarts and, within this process, when
// the cache cannot be written. Its methods run under the client's chain lock.
type offlineTrust struct {
	store   *store
	persist bool
	// trusted is the latest trusted time this process knows (ms since the epoch).
	trusted    int64
	hasTrusted bool
	// online is the last answer of the server in this process: it outranks older files.
	online *onlineAnswer
}

type onlineAnswer struct {
	at      int64
	verdict *verdict
}

// onlineAnswerAt records an answer of the server: its time becomes the trusted time (also
// downwards, so a clock once set far ahead stops blocking), and its verdict replaces any
// earlier one. clock.json is written first, so no other state file exists without it.
// It returns whether clock.json was written.
func (t *offlineTrust) onlineAnswerAt(serverTime int64, v *verdict, save save) bool {
	t.trusted, t.hasTrusted = serverTime, true
	t.online = &onlineAnswer{at: serverTime, verdict: v}
	if !t.persist {
		return false
	}
	saved := save(func() error { return t.store.writeClock(serverTime, v) })
	save(func() error {
		if v != nil {
			return t.store.writeVerdict(v)
		}
		return t.store.deleteVerdict()
	})
	return saved
}

// check decides whether the offline tiers may answer at now, and advances the trusted
// time to now whatever the outcome, so a failed check (an expired token seen at +73 h)
// still counts when the clock is then set back. An untrusted clock record is never
// overwritten from the local clock: only the server re-establishes it.
func (t *offlineTrust) check(now int64, save save) *refusal {
	clock := t.store.readClock()
	file := t.store.readVerdict()
	v, damaged := t.verdict(clock, file)
	latest, hasLatest, untrusted := t.trustedTime(clock)
	if untrusted != nil {
		if v != nil || damaged {
			return t.revoked(v)
		}
		return untrusted
	}
	if !hasLatest || now > latest {
		t.trusted, t.hasTrusted = now, true
		copy := v
		if copy == nil && clock.kind == clockTrusted {
			copy = clock.revoked
		}
		if t.persist {
			save(func() error { return t.store.writeClock(now, copy) })
		}
	} else {
		t.trusted, t.hasTrusted = latest, true
	}
	if v != nil || damaged {
		return t.revoked(v)
	}
	if hasLatest && now < latest-ClockRollbackTolerance.Milliseconds() {
		return &refusal{
			code:    "CLOCK_ROLLBACK",
			message: fmt.Sprintf("the system clock (%s) is behind a time already seen (%s); it was set back", isoOfMillis(now), isoOfMillis(latest)),
		}
	}
	return nil
}

// advanceTo moves the trusted time on to a signed time later than any seen (a .lic
// file's issued_at).
func (t *offlineTrust) advanceTo(ms int64, save save) {
	if t.hasTrusted && ms <= t.trusted {
		return
	}
	t.trusted, t.hasTrusted = ms, true
	if t.persist {
		save(func() error { return t.store.writeClock(ms, nil) })
	}
}

// verdict is the verdict in force: revoked.json, else its copy in clock.json, unless
// this process heard the server since. damaged is true for an unreadable revoked.json,
// which fails safe: someone changed it, and it may have said "revoked".
func (t *offlineTrust) verdict(clock clockRecord, file verdictRecord) (v *verdict, damaged bool) {
	onDisk := file
	if !onDisk.present() && clock.kind == clockTrusted && clock.revoked != nil {
		onDisk = verdictRecord{verdict: clock.revoked}
	}
	if onDisk.damaged || t.online == nil {
		return onDisk.verdict, onDisk.damaged
	}
	if onDisk.verdict == nil {
		return t.online.verdict, false
	}
	diskAt, ok := parseTime(onDisk.verdict.ServerTime)
	if !ok || diskAt.UnixMilli() > t.online.at {
		return onDisk.verdict, false
	}
	return t.online.verdict, false
}

// trustedTime is the latest trusted time, or a CLOCK_UNTRUSTED refusal.
func (t *offlineTrust) trustedTime(clock clockRecord) (int64, bool, *refusal) {
	latest, has := t.trusted, t.hasTrusted
	if clock.kind == clockTrusted && (!has || clock.latest > latest) {
		latest, has = clock.latest, true
	}
	// The server answered in this process: its time stands, whatever happened to the file.
	if t.online != nil {
		return latest, has, nil
	}
	file := t.store.file("clock.json")
	untrusted := func(what string) *refusal {
		return &refusal{
			code:    "CLOCK_UNTRUSTED",
			message: what + ", so a clock set back cannot be detected; offline validation is refused until the server is reached again",
		}
	}
	switch clock.kind {
	case clockDamaged:
		return 0, false, untrusted(fmt.Sprintf("the trusted time in %s cannot be read (%s)", file, clock.why))
	case clockMissing:
		for _, other := range []string{"grace.json", "revoked.json"} {
			if t.store.has(other) {
				return 0, false, untrusted(fmt.Sprintf("the trusted time %s is missing while %s is there", file, other))
			}
		}
	}
	// Missing with nothing else cached: a first run (or a cache that cannot be written).
	return latest, has, nil
}

func (t *offlineTrust) revoked(v *verdict) *refusal {
	if v == nil {
		return &refusal{
			code:    "LICENSE_REVOKED",
			message: fmt.Sprintf("the record of the server's last verdict (%s) cannot be read; offline validation is refused until the server answers that the license is valid", t.store.file("revoked.json")),
		}
	}
	return &refusal{
		code:    "LICENSE_REVOKED",
		message: fmt.Sprintf("the server answered at %s that this license is not valid (%s: %s); offline validation is refused until it answers valid again", v.ServerTime, v.Reason, v.Message),
	}
}
