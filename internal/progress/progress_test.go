package progress

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a buffer safe for the line's goroutine and the test's.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var doneRE = regexp.MustCompile(`(\d+)/100 done`)

// TestCountNeverGoesBack: updates racing from many goroutines never make
// the drawn count decrease.
func TestCountNeverGoesBack(t *testing.T) {
	var out syncBuffer
	l := New(&out, true, 5*time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				// Snapshots arrive out of order: goroutine g sends stale ones.
				n := i - g%3
				if n < 0 {
					n = 0
				}
				l.Set("done", n, 100)
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	wg.Wait()
	l.Set("done", 99, 100)
	time.Sleep(20 * time.Millisecond)
	l.Close()
	last := -1
	draws := doneRE.FindAllStringSubmatch(out.String(), -1)
	require.NotEmpty(t, draws)
	for _, m := range draws {
		n, _ := strconv.Atoi(m[1])
		assert.GreaterOrEqual(t, n, last, "the count went back")
		last = n
	}
}

// TestPlainLinesAreThrottled: off a terminal, at most one status line is
// printed per interval however many updates arrive, and log lines come
// through whole.
func TestPlainLinesAreThrottled(t *testing.T) {
	var out syncBuffer
	const every = 50 * time.Millisecond
	l := New(&out, false, every)
	start := time.Now()
	for i := range 2000 {
		l.Set("working", i, 2000)
		if i == 1000 {
			l.Logf("job %d finished", i)
		}
		time.Sleep(100 * time.Microsecond)
	}
	elapsed := time.Since(start)
	l.Close()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	status := 0
	for _, ln := range lines {
		if strings.Contains(ln, "/2000 working") {
			status++
		}
	}
	assert.Contains(t, out.String(), "job 1000 finished\n")
	assert.NotContains(t, out.String(), "\r", "no terminal control off a terminal")
	assert.LessOrEqual(t, status, int(elapsed/every)+2, "at most one status line per interval (plus the final one)")
	assert.Positive(t, status)
}

func TestTerminalLogLinesDoNotTear(t *testing.T) {
	var out syncBuffer
	l := New(&out, true, time.Millisecond)
	l.Set("done", 3, 10)
	time.Sleep(10 * time.Millisecond)
	l.Logf("job a: ok")
	l.Close()
	s := out.String()
	assert.Contains(t, s, "\r\033[Kjob a: ok\n", "the status line is cleared before a log line")
	assert.True(t, strings.HasSuffix(s, "left\n") || strings.Contains(s, "3/10 done"), s)
}
