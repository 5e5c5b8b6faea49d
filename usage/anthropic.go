package usage

// Anthropic is a usage object of the Anthropic Messages API, as the API
// sends it and Claude Code passes it on; nil fields were absent.
type Anthropic struct {
	Input         *int64 `json:"input_tokens"`
	CacheCreation *int64 `json:"cache_creation_input_tokens"`
	CacheRead     *int64 `json:"cache_read_input_tokens"`
	Output        *int64 `json:"output_tokens"`
	// Lifetimes splits the cache writes by lifetime; the 1-hour share is
	// billed higher.
	Lifetimes *struct {
		OneHour *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

// Usage maps the counters onto a Usage (input_tokens is already the
// uncached part). Complete is left false: whether the counters are all
// there is the reader's call.
func (a Anthropic) Usage() Usage {
	u := Usage{Input: Count(a.Input), Cached: Count(a.CacheRead), CacheCreated: Count(a.CacheCreation), Output: Count(a.Output)}
	if a.Lifetimes != nil {
		u.CacheCreated1h = min(Count(a.Lifetimes.OneHour), u.CacheCreated)
	}
	return u
}

// Count is a reported token count: 0 when it was absent (nil) or negative.
func Count(p *int64) int64 {
	if p == nil || *p < 0 {
		return 0
	}
	return *p
}
