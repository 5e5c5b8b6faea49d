package gateway

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRequestModel(t *testing.T) {
	long := strings.Repeat("x", maxRequestHead)
	for _, c := range []struct{ name, head, want string }{
		{"first", `{"model":"gpt-4.1","stream":true}`, "gpt-4.1"},
		{"after other members", `{"stream":true,"messages":[{"role":"user","content":"hi","model":"inner"}],"model":"claude-opus-5-5"}`, "claude-opus-5-5"},
		{"quoted in text", `{"input":"\"model\":\"gpt-6-astra\"","model":"gpt-4.1"}`, "gpt-4.1"},
		{"nested only", `{"metadata":{"model":"inner"}}`, ""},
		{"past the head", (`{"input":"` + long + `","model":"gpt-4.1"}`)[:maxRequestHead], ""},
		{"not a string", `{"model":7}`, ""},
		{"not an object", `["model","gpt-4.1"]`, ""},
		{"empty", ``, ""},
		{"bounded", `{"model":"` + strings.Repeat("m", 300) + `"}`, strings.Repeat("m", 128) + "…"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, requestModel([]byte(c.head)))
		})
	}
}

func TestEstimate(t *testing.T) {
	// Nothing measured: input from the request, output from the response.
	u := estimate(measure{bytes: 401}, 101)
	assert.Equal(t, int64(51), u.Input)
	assert.Equal(t, int64(101), u.Output)
	assert.False(t, u.Complete)
	// A measured input (Anthropic's message_start) is kept; a measured
	// output above the bound too.
	m := measure{bytes: 40, hasUsage: true}
	m.usage.Input, m.usage.Cached, m.usage.Output = 3, 1000, 50
	u = estimate(m, 1<<20)
	assert.Equal(t, int64(3), u.Input)
	assert.Equal(t, int64(1000), u.Cached)
	assert.Equal(t, int64(50), u.Output)
}
