package usage

import (
	"encoding/json"
	"testing"
)

func TestAnthropicUsage(t *testing.T) {
	var a Anthropic
	body := `{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":3000,
		"output_tokens":-1,"cache_creation":{"ephemeral_1h_input_tokens":250}}`
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatal(err)
	}
	got := a.Usage()
	want := Usage{Input: 12, Cached: 3000, CacheCreated: 100, CacheCreated1h: 100}
	if got != want {
		t.Fatalf("Usage() = %+v, want %+v (negative output counts 0, the 1-hour share is bounded by the writes)", got, want)
	}
	if got := (Anthropic{}).Usage(); got != (Usage{}) {
		t.Fatalf("absent counters: %+v", got)
	}
}

func TestCount(t *testing.T) {
	n, m := int64(7), int64(-3)
	if Count(&n) != 7 || Count(&m) != 0 || Count(nil) != 0 {
		t.Fatal("Count: want the value, 0 for negative, 0 for absent")
	}
}
