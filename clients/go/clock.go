package client

import "time"

// Clock is the client's source of time and timers: the system clock, or a test's.
// Timers measure elapsed time; Now is the wall clock, which a user may set.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (or, for a test clock, when the test moves
	// time on) once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not run yet.
	Stop() bool
}

type systemClock struct{}

func (systemClock) Now() time.Time                            { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// SystemClock is the real clock, the default.
var SystemClock Clock = systemClock{}
