package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/internal/lines"
)

func TestLiveLines(t *testing.T) {
	in := "first\n\n   \nsecond\r\n" + strings.Repeat("x", lines.MaxBytes+1) + "\nthird"
	var errOut bytes.Buffer
	done := make(chan struct{})
	defer close(done)
	var got []string
	for m := range liveLines(strings.NewReader(in), &errOut, done) {
		got = append(got, m)
	}
	assert.Equal(t, []string{"first", "second", "third"}, got, "blank lines skipped, an over-long line dropped, reading goes on")
	assert.Equal(t, "outpost: --live: dropped a line over 16 MiB\n", errOut.String())
}
