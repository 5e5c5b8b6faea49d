package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/outposterr"
)

// TestExitCodesAndClasses holds the documented exit code of every class and
// its reverse, which outpost ci reports for a run that recorded nothing.
func TestExitCodesAndClasses(t *testing.T) {
	want := map[outposterr.Class]ExitCode{
		outposterr.Configuration: 2,
		outposterr.Process:       1,
		outposterr.Quota:         3,
		outposterr.Timeout:       6,
		outposterr.Aborted:       130,
		outposterr.Sandbox:       7,
		outposterr.Bootstrap:     8,
		outposterr.Session:       9,
		outposterr.Protocol:      10,
		outposterr.Internal:      11,
	}
	assert.Len(t, want, len(outposterr.Classes), "every class has its code here")
	for _, c := range outposterr.Classes {
		code := ExitCodeOf(outposterr.New(c, "x"))
		assert.Equal(t, want[c], code, "class %s", c)
		assert.Equal(t, string(c), classOfExit(int(code)), "exit code %d", code)
	}
	// A process error's details have codes of their own, still of class process.
	details := map[ExitCode]outposterr.Details{4: {Unavailable: "overloaded"}, 5: {Auth: "http 401"}, 12: {Budget: "cost"}}
	for code, d := range details {
		assert.Equal(t, code, ExitCodeOf(outposterr.New(outposterr.Process, "x").With(d)))
		assert.Equal(t, string(outposterr.Process), classOfExit(int(code)))
	}
	assert.Equal(t, ExitOK, ExitCodeOf(nil))
	assert.Equal(t, "", classOfExit(0))
	assert.Equal(t, string(outposterr.Aborted), classOfExit(143), "SIGTERM")
	assert.Equal(t, string(outposterr.Process), classOfExit(99), "an unknown code")
}
