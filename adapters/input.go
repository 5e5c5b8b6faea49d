package adapters

import (
	"strconv"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
)

// Validate checks what every CLI needs of an input, before any command is
// built: a prompt, a well-formed conversation id and model, and a
// conversation to fork from. It is the one place these are checked: the
// harness calls it before a turn, and every adapter's Request calls
// [Input.ValidateFor] first and then checks only what is particular to its
// CLI.
func (in Input) Validate() error {
	switch {
	case strings.TrimSpace(in.Prompt) == "":
		return outposterr.New(outposterr.Configuration, "empty prompt")
	case in.Fork && in.Continue == "":
		return outposterr.New(outposterr.Configuration, "fork needs the conversation to fork")
	case in.Continue != "" && !ValidID(in.Continue):
		return outposterr.New(outposterr.Configuration, "invalid conversation id %q", Preview(in.Continue, 80))
	case in.MaxTurns < 0:
		return outposterr.New(outposterr.Configuration, "negative max turns %d", in.MaxTurns)
	case in.Model != "" && !ValidModel(in.Model):
		return outposterr.New(outposterr.Configuration, "invalid model name %q", Preview(in.Model, 80))
	}
	return nil
}

// ValidateFor is [Input.Validate] with the agent's name on the error (a
// configuration error naming the agent, as adapters report theirs).
func (in Input) ValidateFor(agent string) error {
	err := in.Validate()
	if err == nil {
		return nil
	}
	return ConfigError(agent, "%s", err.Error())
}

// CheckLimits is the configuration error of agent for a negative MaxRetries
// or RequestTimeout, for the adapters whose CLI has a knob for them; nil
// when both are usable.
func (in Input) CheckLimits(agent string) error {
	switch {
	case in.MaxRetries != nil && *in.MaxRetries < 0:
		return ConfigError(agent, "negative max retries %d", *in.MaxRetries)
	case in.RequestTimeout < 0:
		return ConfigError(agent, "negative request timeout %s", in.RequestTimeout)
	}
	return nil
}

// RequestTimeoutMillis is RequestTimeout in whole milliseconds, rounded up
// so a sub-millisecond remainder never shortens it: the unit of the CLIs'
// timeout knobs.
func (in Input) RequestTimeoutMillis() string {
	ms := (in.RequestTimeout + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatInt(int64(ms), 10)
}
