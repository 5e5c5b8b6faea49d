// Package reset turns the reset times coding-agent CLIs print in quota and
// rate-limit texts into absolute instants.
//
// The helpers are pure: they never read a clock. The caller passes at, the
// instant the text was seen (the harness time of the event or stderr line),
// and relative or date-less forms are resolved against it:
//
//   - clock times, optionally with an IANA zone in parentheses:
//     "resets 12:50am (America/Los_Angeles)", "resets 3:45pm", "resets 5am",
//     "resets at 4 a.m. (Asia/Tokyo)", "Your limit will reset at 9am
//     (America/Chicago).", "try again at 12:16 PM.", "resets 14:00 (UTC)",
//     and with a date or weekday: "resets Dec 5, 11am (UTC)", "resets Mon 9am",
//     "try again at Dec 3rd, 2026 12:00 AM." (a stated year is taken as is).
//     The result is the next occurrence strictly after at, in the stated zone,
//     or in at.Location() when none is stated. The next day is computed on the
//     calendar (time.Date with day+1), never by adding 24 hours, so a DST change
//     between at and the reset does not shift the wall-clock time.
//   - relative durations: "in 2 days 17 hours 14 minutes", "in 2 hours",
//     "in 15 hours 23 minutes", "in 58 hours", "in 17 seconds".
//   - compact durations: "Resets in 2h39m52s", "167h54m10s", "after 5s",
//     "after 6173ms".
//   - epoch seconds after a pipe: "Claude AI usage limit reached|1762952400".
//   - absolute dates: "You will regain access on 2026-04-01 at 00:00 UTC.",
//     RFC 3339 stamps.
//
// Zone names are resolved with [time.LoadLocation]; this package does not
// embed the zone database (a library should not decide that for its program).
// A program that runs where no zoneinfo is installed should import
// time/tzdata. An unknown zone makes the clock form fail (ok=false) rather
// than guess a wrong instant; callers then keep "quota, reset unknown".
//
// Durations longer than [MaxAhead] and out-of-range clock fields are rejected,
// so absurd inputs cannot overflow or produce nonsense instants.
package reset

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxAhead bounds how far in the future a relative or compact duration may
// point. Longer durations are treated as unparseable.
const MaxAhead = 366 * 24 * time.Hour

// Parse finds a reset time in text and resolves it against at. The forms are
// tried from the most to the least specific: epoch after a pipe, absolute date,
// clock time, relative duration, compact duration.
func Parse(text string, at time.Time) (time.Time, bool) {
	if t, ok := Epoch(text); ok {
		return t, true
	}
	if t, ok := Date(text, at); ok {
		return t, true
	}
	if t, ok := Clock(text, at); ok {
		return t, true
	}
	if t, ok := Relative(text, at); ok {
		return t, true
	}
	// A compact duration counts only alone or after "in" / "after":
	// elsewhere digits and a unit letter may be a piece of an id (an
	// organization's UUID segment "120d").
	for _, m := range compactLeadRE.FindAllStringSubmatch(text, -1) {
		if t, ok := Compact(m[1], at); ok {
			return t, true
		}
	}
	return time.Time{}, false
}

var compactLeadRE = regexp.MustCompile(`(?i)(?:^\s*|\b(?:in|after)\s+)(\d[0-9dhms.]*)`)

// Unix returns the instant of epoch seconds sec in UTC; ok is false for
// non-positive or absurdly large values (beyond year 9999).
func Unix(sec int64) (time.Time, bool) {
	if sec <= 0 || sec > 253402300799 {
		return time.Time{}, false
	}
	return time.Unix(sec, 0).UTC(), true
}

var epochRE = regexp.MustCompile(`\|\s*(\d{9,12})\b`)

// Epoch parses epoch seconds that follow a pipe, as in
// "Claude AI usage limit reached|1762952400".
func Epoch(text string) (time.Time, bool) {
	m := epochRE.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return Unix(n)
}

var dateRE = regexp.MustCompile(`(?i)\b(\d{4})-(\d{2})-(\d{2})(?:\s+at\s+|T|\s+)(\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?\s*(UTC|GMT|Z|[+-]\d{2}:?\d{2})?`)

// Date parses an absolute date and time ("on 2026-04-01 at 00:00 UTC",
// "2026-04-01T00:00:00Z", "2026-04-01 09:30 +02:00"). Without a zone the
// time is read in at.Location().
func Date(text string, at time.Time) (time.Time, bool) {
	m := dateRE.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, false
	}
	y, _ := strconv.Atoi(m[1])
	mo, _ := strconv.Atoi(m[2])
	d, _ := strconv.Atoi(m[3])
	h, _ := strconv.Atoi(m[4])
	mi, _ := strconv.Atoi(m[5])
	s := 0
	if m[6] != "" {
		s, _ = strconv.Atoi(m[6])
	}
	if mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 {
		return time.Time{}, false
	}
	loc := at.Location()
	switch z := strings.ToUpper(m[7]); z {
	case "":
	case "UTC", "GMT", "Z":
		loc = time.UTC
	default:
		sign := 1
		if z[0] == '-' {
			sign = -1
		}
		digits := strings.ReplaceAll(z[1:], ":", "")
		zh, _ := strconv.Atoi(digits[:2])
		zm, _ := strconv.Atoi(digits[2:])
		if zh > 14 || zm > 59 {
			return time.Time{}, false
		}
		loc = time.FixedZone(z, sign*(zh*3600+zm*60))
	}
	t := time.Date(y, time.Month(mo), d, h, mi, s, 0, loc)
	if t.Day() != d { // February 30th and friends
		return time.Time{}, false
	}
	return t, true
}

// clockRE needs a lead word so that arbitrary numbers in a text are never read
// as times: "reset(s)", "try again", "available again", "regain access",
// optionally followed by "at" or "on". A weekday ("Mon") or a month and day
// ("Dec 5,"), optionally with a year ("Dec 3rd, 2026", Codex's wording),
// may precede the time. Groups: 1 weekday, 2 month, 3 day, 4 year, 5 hour,
// 6 minute, 7 meridiem, 8 zone.
var clockRE = regexp.MustCompile(`(?i)\b(?:resets?|try\s+again|available\s+again|regain\s+access)(?:\s+(?:at|on))?\s+` +
	`(?:(mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?\s+)?` +
	`(?:(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(?:(\d{4}),?\s+)?(?:at\s+)?)?` +
	`(\d{1,2})(?::(\d{2}))?\s*(a\.?\s?m\.?|p\.?\s?m\.?)?(?:\s*\(\s*([A-Za-z][A-Za-z0-9_+\-/]*)\s*\))?`)

var (
	weekdays = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday,
		"wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}
	months = map[string]time.Month{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}
)

// Clock parses a clock time ("resets 12:50am (America/Los_Angeles)",
// "try again at 12:16 PM.", "resets Dec 5, 11am (UTC)", "resets Mon 9am")
// and returns its next occurrence strictly after at, in the stated zone or,
// without one, in at.Location(). A bare hour needs a meridiem ("5am");
// 24-hour times need minutes ("14:00"). With a month and day the year is the
// first one that puts the instant after at; with a weekday, the first such
// weekday.
func Clock(text string, at time.Time) (time.Time, bool) {
	for _, ix := range clockRE.FindAllStringSubmatchIndex(text, 4) {
		m := make([]string, len(ix)/2)
		for i := range m {
			if ix[2*i] >= 0 {
				m[i] = text[ix[2*i]:ix[2*i+1]]
			}
		}
		if m[8] == "" && strings.HasPrefix(strings.TrimLeft(text[ix[1]:], " \t"), "(") {
			// A parenthesized zone we could not read: refuse rather than
			// silently use the wrong zone.
			continue
		}
		if t, ok := clock(m, at); ok {
			return t, true
		}
	}
	return time.Time{}, false
}

func clock(m []string, at time.Time) (time.Time, bool) {
	h, err := strconv.Atoi(m[5])
	if err != nil {
		return time.Time{}, false
	}
	mi := 0
	if m[6] != "" {
		mi, _ = strconv.Atoi(m[6])
	}
	mer := strings.ToLower(strings.NewReplacer(".", "", " ", "").Replace(m[7]))
	switch {
	case mer == "" && m[6] == "":
		return time.Time{}, false // "resets 5": not a time
	case mer == "" && h > 23:
		return time.Time{}, false
	case mer != "" && (h < 1 || h > 12):
		return time.Time{}, false
	case mi > 59:
		return time.Time{}, false
	}
	switch mer {
	case "am":
		if h == 12 {
			h = 0
		}
	case "pm":
		if h != 12 {
			h += 12
		}
	}
	loc := at.Location()
	if m[8] != "" {
		l, ok := location(m[8])
		if !ok {
			return time.Time{}, false
		}
		loc = l
	}
	if m[2] != "" {
		month := months[strings.ToLower(m[2])]
		day, _ := strconv.Atoi(m[3])
		if day < 1 || day > 31 {
			return time.Time{}, false
		}
		if m[4] != "" {
			// A stated year: the instant is absolute.
			y, _ := strconv.Atoi(m[4])
			t := time.Date(y, month, day, h, mi, 0, 0, loc)
			if t.Day() != day || t.Sub(at) > MaxAhead || at.Sub(t) > MaxAhead {
				return time.Time{}, false
			}
			return t, true
		}
		y := at.In(loc).Year()
		for i := 0; i < 2; i++ {
			t := time.Date(y+i, month, day, h, mi, 0, 0, loc)
			if t.Day() != day {
				continue // no such day that year
			}
			if t.After(at) {
				return t, true
			}
		}
		return time.Time{}, false
	}
	if m[1] != "" {
		wd := weekdays[strings.ToLower(m[1])]
		l := at.In(loc)
		for i := 0; i <= 7; i++ {
			t := time.Date(l.Year(), l.Month(), l.Day()+i, h, mi, 0, 0, loc)
			if t.Weekday() == wd && t.After(at) {
				return t, true
			}
		}
		return time.Time{}, false
	}
	return Next(at, h, mi, loc), true
}

// roundingSlack is how far a minute-precision clock time may lie before at
// and still name the present: "try again at 9:51" printed at 9:51:30 means
// the limit resets now, not tomorrow at 9:51.
const roundingSlack = 2 * time.Minute

// Next returns the first instant strictly after at whose wall clock in loc
// reads hour:minute — or that instant today when it lies less than
// [roundingSlack] before at (CLIs print reset clocks to the minute). Days are
// stepped on the calendar, so DST changes keep the wall-clock time; a time
// that does not exist on a day (a spring-forward gap) is normalized by
// [time.Date].
func Next(at time.Time, hour, minute int, loc *time.Location) time.Time {
	l := at.In(loc)
	if t := time.Date(l.Year(), l.Month(), l.Day(), hour, minute, 0, 0, loc); !t.After(at) && at.Sub(t) < roundingSlack {
		return t
	}
	for i := 0; i < 3; i++ {
		t := time.Date(l.Year(), l.Month(), l.Day()+i, hour, minute, 0, 0, loc)
		if t.After(at) {
			return t
		}
	}
	return time.Date(l.Year(), l.Month(), l.Day()+1, hour, minute, 0, 0, loc)
}

var (
	locMu    sync.Mutex
	locCache = map[string]*time.Location{}
)

const locCacheMax = 256

// location loads an IANA zone, caching the answer (including "unknown") so a
// recognizer applied to many lines does not reread the zone database.
func location(name string) (*time.Location, bool) {
	switch strings.ToUpper(name) {
	case "UTC", "GMT", "Z":
		return time.UTC, true
	}
	if len(name) > 64 || strings.Contains(name, "..") || strings.EqualFold(name, "local") {
		return nil, false
	}
	locMu.Lock()
	l, seen := locCache[name]
	locMu.Unlock()
	if seen {
		return l, l != nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		l = nil
	}
	locMu.Lock()
	if len(locCache) >= locCacheMax {
		clear(locCache)
	}
	locCache[name] = l
	locMu.Unlock()
	return l, l != nil
}

var (
	relRE  = regexp.MustCompile(`(?i)\bin\s+((?:\d{1,6}\s*(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b[\s,]*(?:and\s+)?)+)`)
	partRE = regexp.MustCompile(`(?i)(\d{1,6})\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b`)
)

// Relative parses a spelled-out duration after "in" ("in 2 days 17 hours 14
// minutes", "in 58 hours", "in 17 seconds") and adds it to at.
func Relative(text string, at time.Time) (time.Time, bool) {
	m := relRE.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, false
	}
	var total time.Duration
	for _, p := range partRE.FindAllStringSubmatch(m[1], -1) {
		n, err := strconv.ParseInt(p[1], 10, 64)
		if err != nil {
			return time.Time{}, false
		}
		var unit time.Duration
		switch u := strings.ToLower(p[2]); {
		case strings.HasPrefix(u, "d"):
			unit = 24 * time.Hour
		case strings.HasPrefix(u, "h"):
			unit = time.Hour
		case strings.HasPrefix(u, "m"):
			unit = time.Minute
		default:
			unit = time.Second
		}
		total += time.Duration(n) * unit
		if total > MaxAhead {
			return time.Time{}, false
		}
	}
	if total <= 0 {
		return time.Time{}, false
	}
	return at.Add(total), true
}

var compactRE = regexp.MustCompile(`(?i)\b(?:(\d{1,6})d)?(?:(\d{1,6})h)?(?:(\d{1,6})m)?(?:(\d{1,9})(?:\.(\d{1,9}))?s)?(?:(\d{1,9})ms)?\b`)

// Compact parses a compact duration ("2h39m52s", "167h54m10s", "45m", "5s",
// "6173ms", "1.5s") anywhere in text and adds it to at.
func Compact(text string, at time.Time) (time.Time, bool) {
	for _, m := range compactRE.FindAllStringSubmatch(text, -1) {
		if m[0] == "" {
			continue
		}
		num := func(s string) int64 {
			n, _ := strconv.ParseInt(s, 10, 64)
			return n
		}
		var total time.Duration
		total += time.Duration(num(m[1])) * 24 * time.Hour
		total += time.Duration(num(m[2])) * time.Hour
		total += time.Duration(num(m[3])) * time.Minute
		total += time.Duration(num(m[4])) * time.Second
		if m[5] != "" {
			frac := (m[5] + "000000000")[:9]
			total += time.Duration(num(frac))
		}
		total += time.Duration(num(m[6])) * time.Millisecond
		if total <= 0 || total > MaxAhead {
			continue
		}
		return at.Add(total), true
	}
	return time.Time{}, false
}
