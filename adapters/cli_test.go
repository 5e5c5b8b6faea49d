package adapters_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// fake is an adapter type built the way the built-in ones are.
type fake struct {
	adapters.CLI
	flag bool
}

func (f *fake) NewDecoder() adapters.Decoder { return nil }
func (f *fake) Request(adapters.Input) (sandbox.Command, error) {
	return sandbox.Command{}, nil
}

var _ adapters.Adapter = (*fake)(nil)

func withFlag() adapters.Option[fake] { return func(f *fake) { f.flag = true } }

func TestBuild(t *testing.T) {
	r := adapters.NewRecognizer(adapters.Recognition{Wordings: []adapters.Wordings{{
		Quota: []*regexp.Regexp{regexp.MustCompile(`out of quota`)}}}})
	args := []string{"--a"}
	caps := adapters.Capabilities{Resumable: true, Usage: adapters.UsageEvents}
	a := adapters.Build("fake", caps, r, adapters.WithArgs[fake](args...), withFlag(), adapters.WithArgs[fake]("--b"))
	args[0] = "--changed"
	b := adapters.Build("fake", adapters.Capabilities{}, r, adapters.WithBinary[fake]("/opt/fake"))

	assert.Equal(t, "fake", a.Name())
	assert.Equal(t, "fake", a.Binary(), "the name is the default program")
	assert.Equal(t, "/opt/fake", b.Binary())
	assert.Equal(t, caps, a.Capabilities())
	assert.Equal(t, adapters.Capabilities{}, b.Capabilities())
	assert.True(t, a.flag)
	assert.False(t, b.flag)
	assert.Equal(t, []string{"x", "--a", "--b"}, a.AppendExtra([]string{"x"}), "options apply in order; the caller's slice is copied")
	assert.Equal(t, []string{"x"}, b.AppendExtra([]string{"x"}), "adapters share no arguments")
	ok, _ := a.Quota("Out of quota", time.Now())
	assert.True(t, ok, "the recognizer is embedded")
}

func TestConfigError(t *testing.T) {
	err := adapters.ConfigError("fake", "bad %s", "thing")
	assert.EqualError(t, err, "fake: bad thing")
	var oe *outposterr.Error
	if assert.ErrorAs(t, err, &oe) {
		assert.Equal(t, outposterr.Configuration, oe.Class)
		assert.Equal(t, "fake", oe.Details.Agent)
	}
}

func TestV1BaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":        "http://127.0.0.1:8080/v1",
		"http://127.0.0.1:8080/":       "http://127.0.0.1:8080/v1",
		"https://gw.example/openai/v1": "https://gw.example/openai/v1",
		"ftp://x":                      "",
		"http://h/?q=1":                "",
		"/relative":                    "",
	} {
		got, ok := adapters.V1BaseURL(in)
		assert.Equal(t, want, got, in)
		assert.Equal(t, want != "", ok, in)
		got, err := adapters.ClientBaseURL("fake", in)
		assert.Equal(t, want, got, in)
		if want == "" {
			var oe *outposterr.Error
			if assert.ErrorAs(t, err, &oe, in) {
				assert.Equal(t, outposterr.Configuration, oe.Class)
				assert.Equal(t, "fake", oe.Details.Agent)
				assert.Contains(t, oe.Error(), "invalid endpoint base URL")
			}
		} else {
			assert.NoError(t, err, in)
		}
	}
}

// TestClientEndpoint: the base URL is checked first, then an endpoint may
// carry an API key or an OAuth token, not both.
func TestClientEndpoint(t *testing.T) {
	for _, ep := range []adapters.Endpoint{{BaseURL: "http://h"}, {BaseURL: "http://h", APIKey: "k"}, {BaseURL: "http://h", OAuthToken: "t"}} {
		base, err := adapters.ClientEndpoint("fake", &ep)
		require.NoError(t, err)
		assert.Equal(t, "http://h/v1", base)
	}
	_, err := adapters.ClientEndpoint("fake", &adapters.Endpoint{BaseURL: "ftp://h", APIKey: "k", OAuthToken: "t"})
	assert.ErrorContains(t, err, "invalid endpoint base URL")
	_, err = adapters.ClientEndpoint("fake", &adapters.Endpoint{BaseURL: "http://h", APIKey: "k", OAuthToken: "t"})
	var oe *outposterr.Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, outposterr.Configuration, oe.Class)
	assert.Equal(t, "fake", oe.Details.Agent)
	assert.Contains(t, oe.Error(), "both an API key and an OAuth token")
}

// TestModelNamesRefuseInvisibleCharacters: a model name with a
// bidirectional override or a zero-width character is never passed to a
// CLI (it would print as another model's name).
func TestModelNamesRefuseInvisibleCharacters(t *testing.T) {
	assert.True(t, adapters.ValidModel("claude-sonnet-5"))
	for _, m := range []string{"claude\u202e5-tennos", "gpt\u200b-6", "m\u2066x\u2069", "m\u200f"} {
		assert.False(t, adapters.ValidModel(m), "%+q", m)
		r, ok := adapters.Invisible(m)
		assert.True(t, ok, "%+q", m)
		assert.NotZero(t, r)
	}
	_, ok := adapters.Invisible("tâche 日本")
	assert.False(t, ok)
}
