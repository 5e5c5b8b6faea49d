package procowner

import (
	"os"
	"strconv"
	"time"
)

// Policy is how every reaper (host, Docker, Kubernetes) decides that a
// resource has lost its owner: a resource of this host whose owner process
// is gone, or one whose owner cannot be checked here (another host, no
// owner recorded) once its last sign of life is older than Grace.
type Policy struct {
	// Grace is the age after which a resource whose owner cannot be
	// checked counts as left over; negative: never.
	Grace time.Duration
	// Hostname is this host's name as owners record it.
	Hostname string
	// Now is the current time.
	Now func() time.Time
	// Alive reports whether pid (with its recorded start time, possibly "")
	// is still the owning process.
	Alive func(pid int, start string) bool
}

// Defaults fills in the zero fields: Grace becomes grace, Hostname
// os.Hostname(), Now time.Now and Alive [Alive].
func (p *Policy) Defaults(grace time.Duration) {
	if p.Grace == 0 {
		p.Grace = grace
	}
	if p.Hostname == "" {
		p.Hostname, _ = os.Hostname()
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Alive == nil {
		p.Alive = Alive
	}
}

// Leftover reports whether a resource owned by o, whose last sign of life
// was at last (zero: unknown), has lost its owner, and why. lastSign names
// that sign in the reason ("it" for a creation time, "its last sign of
// life" for a heartbeat).
func (p Policy) Leftover(o Owner, last time.Time, lastSign string) (reason string, left bool) {
	if o.PID > 0 && o.Host != "" && o.Host == p.Hostname {
		if p.Alive(o.PID, o.Start) {
			return "", false
		}
		return "owner process " + strconv.Itoa(o.PID) + " is gone", true
	}
	if p.Grace < 0 || last.IsZero() {
		return "", false
	}
	if p.Now().Sub(last) > p.Grace {
		return "owner cannot be checked here and " + lastSign + " is older than " + p.Grace.String(), true
	}
	return "", false
}
