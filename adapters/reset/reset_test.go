package reset

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	require.NoError(t, err)
	return l
}

func TestClock(t *testing.T) {
	la := mustLoc(t, "America/Los_Angeles")
	tokyo := mustLoc(t, "Asia/Tokyo")
	chicago := mustLoc(t, "America/Chicago")
	kolkata := mustLoc(t, "Asia/Calcutta")
	// 2026-06-10 15:00 UTC = 08:00 in Los Angeles (PDT), 00:00 next day in Tokyo.
	at := time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		text string
		at   time.Time
		want time.Time
	}{
		{"zone, rolls to next day", "You've hit your session limit · resets 12:50am (America/Los_Angeles)", at,
			time.Date(2026, 6, 11, 0, 50, 0, 0, la)},
		{"zone, same day", "You've hit your session limit · resets 3:50pm (Asia/Tokyo)", at,
			time.Date(2026, 6, 11, 15, 50, 0, 0, tokyo)},
		{"older wording", "You've hit your limit · resets 3:30am (Asia/Calcutta)", at,
			time.Date(2026, 6, 11, 3, 30, 0, 0, kolkata)},
		{"at + dotted meridiem", "You've hit your limit · resets at 4 a.m. (Asia/Tokyo)", at,
			time.Date(2026, 6, 11, 4, 0, 0, 0, tokyo)},
		{"no zone: at's location, later today", "Weekly limit reached ∙ resets 5pm", at,
			time.Date(2026, 6, 10, 17, 0, 0, 0, time.UTC)},
		{"no zone: at's location, tomorrow", "Weekly limit reached ∙ resets 5am", at,
			time.Date(2026, 6, 11, 5, 0, 0, 0, time.UTC)},
		{"no zone, minutes", "resets 3:45pm", at, time.Date(2026, 6, 10, 15, 45, 0, 0, time.UTC)},
		{"zone-less in a non-UTC at", "resets 3:45pm", at.In(la), time.Date(2026, 6, 10, 15, 45, 0, 0, la)},
		{"older sentence", "Claude usage limit reached. Your limit will reset at 9am (America/Chicago).", at,
			time.Date(2026, 6, 11, 9, 0, 0, 0, chicago)},
		{"codex upper-case meridiem", "You've hit your usage limit. Upgrade to Pro or try again at 12:16 PM.", at,
			time.Date(2026, 6, 11, 12, 16, 0, 0, time.UTC)},
		{"noon pm", "try again at 12:00 pm", at, time.Date(2026, 6, 11, 12, 0, 0, 0, time.UTC)},
		{"24 hour", "resets 14:00 (UTC)", at, time.Date(2026, 6, 11, 14, 0, 0, 0, time.UTC)},
		{"equal to at is now (minute precision)", "resets 3pm", at, time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)},
		{"one minute later is today", "resets 3:01pm", at, time.Date(2026, 6, 10, 15, 1, 0, 0, time.UTC)},
		{"month rollover", "resets 1am", time.Date(2026, 1, 31, 23, 0, 0, 0, time.UTC),
			time.Date(2026, 2, 1, 1, 0, 0, 0, time.UTC)},
		{"year rollover", "resets 12:30am (UTC)", time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC),
			time.Date(2027, 1, 1, 0, 30, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := Clock(c.text, c.at)
			require.True(t, ok)
			assert.True(t, c.want.Equal(got), "want %v, got %v", c.want, got)
			got2, ok := Parse(c.text, c.at)
			require.True(t, ok)
			assert.True(t, c.want.Equal(got2), "Parse: want %v, got %v", c.want, got2)
		})
	}
}

func TestClockDST(t *testing.T) {
	la := mustLoc(t, "America/Los_Angeles")
	// Spring forward: 2026-03-08 02:00 PST becomes 03:00 PDT.
	at := time.Date(2026, 3, 7, 22, 0, 0, 0, la) // 06:00 UTC on 03-08
	got, ok := Clock("resets 3am (America/Los_Angeles)", at)
	require.True(t, ok)
	want := time.Date(2026, 3, 8, 10, 0, 0, 0, time.UTC) // 03:00 PDT, not 11:00 UTC
	assert.True(t, want.Equal(got), "got %v", got)
	assert.Equal(t, 3, got.In(la).Hour())

	// Fall back: 2026-11-01 02:00 PDT becomes 01:00 PST; wall clock kept.
	at = time.Date(2026, 10, 31, 23, 0, 0, 0, la)
	got, ok = Clock("resets 9am (America/Los_Angeles)", at)
	require.True(t, ok)
	want = time.Date(2026, 11, 1, 17, 0, 0, 0, time.UTC) // 09:00 PST
	assert.True(t, want.Equal(got), "got %v", got)

	// A time inside the spring-forward gap is normalized, not dropped.
	at = time.Date(2026, 3, 7, 22, 0, 0, 0, la)
	got, ok = Clock("resets 2:30am (America/Los_Angeles)", at)
	require.True(t, ok)
	assert.True(t, got.After(at))
	assert.Less(t, got.Sub(at), 6*time.Hour)

	// The zone in the text wins over at's location.
	tokyo := mustLoc(t, "Asia/Tokyo")
	got, ok = Clock("resets 9am (Asia/Tokyo)", time.Date(2026, 3, 7, 22, 0, 0, 0, la))
	require.True(t, ok)
	assert.Equal(t, time.Date(2026, 3, 9, 9, 0, 0, 0, tokyo).Unix(), got.Unix())
}

func TestClockWithDate(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	at := time.Date(2026, 12, 2, 8, 54, 47, 0, time.UTC) // a Wednesday
	cases := []struct {
		text string
		want time.Time
	}{
		// Captured from claude 2.1.328 (weekly and Opus windows).
		{"You've hit your weekly limit · resets Dec 5, 11am (UTC)", time.Date(2026, 12, 5, 11, 0, 0, 0, time.UTC)},
		{"You've hit your Opus limit · resets Dec 8, 2pm (UTC)", time.Date(2026, 12, 8, 14, 0, 0, 0, time.UTC)},
		{"resets Jan 3, 9:30am (America/New_York)", time.Date(2027, 1, 3, 9, 30, 0, 0, ny)},    // year rollover
		{"resets Dec 2, 8am", time.Date(2027, 12, 2, 8, 0, 0, 0, time.UTC)},                    // earlier today: next year
		{"resets December 2nd at 9am", time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)},           // later today
		{"resets Mon 9am", time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)},                       // next Monday
		{"resets Wednesday 8am", time.Date(2026, 12, 9, 8, 0, 0, 0, time.UTC)},                 // today has passed
		{"resets Wed 10am", time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)},                     // later today
		{"resets Fri, Dec 4, 5pm (America/New_York)", time.Date(2026, 12, 4, 17, 0, 0, 0, ny)}, // both: the date wins
		// Captured from codex 0.169.0 (usage_limit_reached): month, ordinal day, year.
		{"You’ve hit your usage limit. … or try again at Dec 3rd, 2026 12:00 AM.", time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)},
		{"try again at Jan 1st, 2027 3:15 PM.", time.Date(2027, 1, 1, 15, 15, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		got, ok := Clock(c.text, at)
		require.True(t, ok, c.text)
		assert.True(t, c.want.Equal(got), "%s: want %v, got %v", c.text, c.want, got)
	}
	for _, text := range []string{"resets Feb 30, 9am", "resets Dec 45, 9am", "resets Dec 5", "try again at Feb 30th, 2027 1:00 AM"} {
		_, ok := Clock(text, at)
		assert.False(t, ok, text)
	}
	// Feb 29 resolves to the next leap year's only when it is within two years.
	got, ok := Clock("resets Feb 29, 9am (UTC)", time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC))
	require.True(t, ok)
	assert.Equal(t, time.Date(2028, 2, 29, 9, 0, 0, 0, time.UTC), got)
}

func TestClockRejects(t *testing.T) {
	at := time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)
	for _, text := range []string{
		"resets 5",                          // bare number
		"resets 13pm",                       // bad meridiem hour
		"resets 0am",                        // bad meridiem hour
		"resets 25:00",                      // bad hour
		"resets 10:75pm",                    // bad minutes
		"resets 3pm (Mars/Olympus_Mons)",    // unknown zone: refuse to guess
		"resets at 4 a.m. (Asia/<…>)",       // unreadable zone
		"the build took 3:45pm of my life",  // no lead word
		"resets in 2 hours",                 // relative, not clock
		"Approaching 5am without a keyword", // no lead word
	} {
		_, ok := Clock(text, at)
		assert.False(t, ok, text)
	}
}

func TestRelative(t *testing.T) {
	at := time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)
	cases := []struct {
		text string
		want time.Duration
	}{
		{"You've hit your usage limit. Try again in 2 days 17 hours 14 minutes.", 2*24*time.Hour + 17*time.Hour + 14*time.Minute},
		{"try again in 4 days 20 hours 9 minutes.", 4*24*time.Hour + 20*time.Hour + 9*time.Minute},
		{"Please try again in 2 hours.", 2 * time.Hour},
		{"Please try again in 15 hours 23 minutes.", 15*time.Hour + 23*time.Minute},
		{"Please try again in 58 hours", 58 * time.Hour},
		{"Try again in 17 seconds.", 17 * time.Second},
		{"in 1 day, 2 hours and 3 minutes", 26*time.Hour + 3*time.Minute},
		{"IN 3 HRS 5 MINS", 3*time.Hour + 5*time.Minute},
	}
	for _, c := range cases {
		got, ok := Relative(c.text, at)
		require.True(t, ok, c.text)
		assert.Equal(t, at.Add(c.want), got, c.text)
		got, ok = Parse(c.text, at)
		require.True(t, ok, c.text)
		assert.Equal(t, at.Add(c.want), got, c.text)
	}
	for _, text := range []string{"in 2 months", "in a moment", "in 0 minutes", "in 999999 days", "try again later"} {
		_, ok := Relative(text, at)
		assert.False(t, ok, text)
	}
}

func TestCompact(t *testing.T) {
	at := time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)
	cases := []struct {
		text string
		want time.Duration
	}{
		{"Resets in 2h39m52s.", 2*time.Hour + 39*time.Minute + 52*time.Second},
		{"Resets in 167h54m10s", 167*time.Hour + 54*time.Minute + 10*time.Second},
		{"Your quota will reset after 5s.", 5 * time.Second},
		{"Retrying after 6173ms...", 6173 * time.Millisecond},
		{"reset after 1.5s", 1500 * time.Millisecond},
		{"45m", 45 * time.Minute},
		{"2d3h", 51 * time.Hour},
	}
	for _, c := range cases {
		got, ok := Compact(c.text, at)
		require.True(t, ok, c.text)
		assert.Equal(t, at.Add(c.want), got, c.text)
		got, ok = Parse(c.text, at)
		require.True(t, ok, c.text)
		assert.Equal(t, at.Add(c.want), got, c.text)
	}
	for _, text := range []string{"resets 5am", "nothing here", "0s", "999999d"} {
		_, ok := Compact(text, at)
		assert.False(t, ok, text)
	}
}

func TestEpoch(t *testing.T) {
	got, ok := Epoch("Claude AI usage limit reached|1762952400")
	require.True(t, ok)
	assert.Equal(t, time.Unix(1762952400, 0).UTC(), got)
	got, ok = Parse("Claude AI usage limit reached|1762952400", time.Now())
	require.True(t, ok)
	assert.Equal(t, int64(1762952400), got.Unix())
	_, ok = Epoch("no pipe 1762952400")
	assert.False(t, ok)
	_, ok = Epoch("a|12")
	assert.False(t, ok)
	_, ok = Unix(0)
	assert.False(t, ok)
	_, ok = Unix(1 << 62)
	assert.False(t, ok)
	u, ok := Unix(1762952400)
	require.True(t, ok)
	assert.Equal(t, time.UTC, u.Location())
}

func TestDate(t *testing.T) {
	at := time.Date(2026, 3, 10, 15, 0, 0, 0, mustLoc(t, "Europe/Berlin"))
	cases := []struct {
		text string
		want time.Time
	}{
		{"You have reached your specified API usage limits. You will regain access on 2026-04-01 at 00:00 UTC.",
			time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
		{"resets 2026-04-01T08:30:00Z", time.Date(2026, 4, 1, 8, 30, 0, 0, time.UTC)},
		{"resets 2026-04-01 09:30 +02:00", time.Date(2026, 4, 1, 7, 30, 0, 0, time.UTC)},
		{"on 2026-04-01 at 10:00", time.Date(2026, 4, 1, 10, 0, 0, 0, at.Location())},
	}
	for _, c := range cases {
		got, ok := Date(c.text, at)
		require.True(t, ok, c.text)
		assert.True(t, c.want.Equal(got), "%s: want %v got %v", c.text, c.want, got)
		got, ok = Parse(c.text, at)
		require.True(t, ok, c.text)
		assert.True(t, c.want.Equal(got), "%s: want %v got %v", c.text, c.want, got)
	}
	for _, text := range []string{"2026-02-30 at 00:00 UTC", "2026-13-01 at 00:00", "2026-04-01 at 25:00", "on 2026-04-01"} {
		_, ok := Date(text, at)
		assert.False(t, ok, text)
	}
}

func TestParseNothing(t *testing.T) {
	for _, text := range []string{"", "Credit balance too low", "API Error: 529 Overloaded", "Please try again later."} {
		_, ok := Parse(text, time.Now())
		assert.False(t, ok, text)
	}
}

func TestNext(t *testing.T) {
	at := time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)
	assert.Equal(t, time.Date(2026, 6, 10, 16, 0, 0, 0, time.UTC), Next(at, 16, 0, time.UTC))
	assert.Equal(t, time.Date(2026, 6, 11, 14, 0, 0, 0, time.UTC), Next(at, 14, 0, time.UTC))
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"You've hit your session limit · resets 12:50am (America/Los_Angeles)",
		"resets at 4 a.m. (Asia/Tokyo)", "try again at 12:16 PM.", "in 2 days 17 hours 14 minutes",
		"Resets in 2h39m52s", "Claude AI usage limit reached|1762952400",
		"You will regain access on 2026-04-01 at 00:00 UTC.", "resets 99:99pm (../../etc/passwd)",
		"in 999999 days", "|999999999999", "2026-04-01T00:00:00+99:99",
	} {
		f.Add(s, int64(1781103600))
	}
	f.Fuzz(func(t *testing.T, text string, sec int64) {
		at := time.Unix(sec%(1<<40), 0)
		got, ok := Parse(text, at)
		if !ok {
			assert.True(t, got.IsZero())
		}
	})
}

func TestNextMinuteRounding(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 51, 30, 0, time.UTC)
	assert.Equal(t, time.Date(2026, 12, 2, 9, 51, 0, 0, time.UTC), Next(at, 9, 51, time.UTC),
		"a reset printed to the minute that just passed is now, not tomorrow")
	assert.Equal(t, time.Date(2026, 12, 3, 9, 40, 0, 0, time.UTC), Next(at, 9, 40, time.UTC),
		"eleven minutes ago is tomorrow's")
}
