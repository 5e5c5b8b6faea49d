package usage

import (
	"strings"
)

// PricesVersion names the price table below: the date it was last checked
// as a whole. A changed price gets a new row date and a new version.
const PricesVersion = "2026-12-01"

// Price is a model's standard API list price in US dollars per million
// tokens. Figures the source does not state are nil: a turn that used such a
// counter keeps an unknown cost.
type Price struct {
	// Model is the model id as its vendor's API names it.
	Model string
	// Input is uncached input; Cached is input read from the prompt cache;
	// Output includes reasoning.
	Input, Cached, Output float64
	// CacheWrite is input written to the prompt cache (Anthropic: with the
	// default five-minute lifetime); CacheWrite1h is input written with a
	// one-hour lifetime (Anthropic only; nil where the vendor has no such
	// tier).
	CacheWrite, CacheWrite1h *float64
	// Source is the page the figures come from; AsOf the date they were
	// confirmed there.
	Source string
	AsOf   string
	// Note says what the figures leave out.
	Note string
}

func ptr(f float64) *float64 { return &f }

const (
	openAILongContext = "standard rates up to 272K input tokens per request; a longer request is billed higher, so such turns are underestimated"
	anthropicWrites   = "cache writes: 5-minute writes 1.25x and 1-hour writes 2x the base input price; a CLI that does not report the 1-hour share has all its writes priced as 5-minute writes"
	anthropicPricing  = "https://platform.claude.com/docs/en/about-claude/pricing"
)

// prices is the table. Only the models the pinned CLIs run by default, or
// report running, are listed; every figure is taken from the vendor's page
// named in Source as of AsOf. A model that is not listed has an unknown cost.
var prices = []Price{
	// Codex 0.169.0's default model (its bundled catalog's first entry;
	// observed as the model of a turn that names none).
	{Model: "gpt-6.1-sol", Input: 2.00, Cached: 0.10, CacheWrite: ptr(2.50), Output: 10.00,
		Source: "https://developers.openai.com/api/docs/models/gpt-6.1-sol", AsOf: "2026-10-01", Note: openAILongContext},
	{Model: "gpt-6-sol", Input: 2.00, Cached: 0.20, CacheWrite: ptr(2.50), Output: 10.00,
		Source: "https://developers.openai.com/api/docs/models/gpt-6-sol", AsOf: "2026-09-22", Note: openAILongContext},
	{Model: "gpt-6-luna", Input: 0.10, Cached: 0.01, CacheWrite: ptr(0.125), Output: 0.50,
		Source: "https://developers.openai.com/api/docs/models/gpt-6-luna", AsOf: "2026-09-22", Note: openAILongContext},
	{Model: "gpt-6-astra", Input: 10.00, Cached: 1.00, CacheWrite: ptr(12.50), Output: 50.00,
		Source: "https://developers.openai.com/api/docs/models/gpt-6-astra", AsOf: "2026-09-05", Note: openAILongContext},
	// Copilot's included model; OpenAI bills no cache writes for it.
	{Model: "gpt-4.1", Input: 2.00, Cached: 0.50, CacheWrite: ptr(0), Output: 8.00,
		Source: "https://developers.openai.com/api/docs/pricing", AsOf: "2026-06-21"},
	// Claude models: Claude Code's default (claude-sonnet-5-5), the models
	// the scripted server announces, and those a CLI may run and report no
	// cost for (Copilot names them with dots: claude-sonnet-5.5). Cache
	// writes: 5 minutes 1.25x, 1 hour 2x the base input price.
	{Model: "claude-sonnet-5-5", Input: 2.00, Cached: 0.10, CacheWrite: ptr(2.50), CacheWrite1h: ptr(4.00), Output: 10.00,
		Source: anthropicPricing, AsOf: "2026-12-01", Note: anthropicWrites},
	{Model: "claude-sonnet-5", Input: 2.00, Cached: 0.20, CacheWrite: ptr(2.50), CacheWrite1h: ptr(4.00), Output: 10.00,
		Source: anthropicPricing, AsOf: "2026-12-01", Note: anthropicWrites},
	{Model: "claude-opus-5-5", Input: 4.00, Cached: 0.20, CacheWrite: ptr(5.00), CacheWrite1h: ptr(8.00), Output: 20.00,
		Source: anthropicPricing, AsOf: "2026-12-01", Note: anthropicWrites},
	// Copilot CLI's Claude model (recorded as claude-sonnet-4.5).
	{Model: "claude-sonnet-4-5", Input: 3.00, Cached: 0.30, CacheWrite: ptr(3.75), CacheWrite1h: ptr(6.00), Output: 15.00,
		Source: anthropicPricing, AsOf: "2026-12-01", Note: anthropicWrites},
	{Model: "claude-haiku-4-5", Input: 1.00, Cached: 0.10, CacheWrite: ptr(1.25), CacheWrite1h: ptr(2.00), Output: 5.00,
		Source: anthropicPricing, AsOf: "2026-12-01", Note: anthropicWrites},
}

// Prices returns a copy of the price table.
func Prices() []Price {
	out := make([]Price, len(prices))
	copy(out, prices)
	return out
}

// Lookup finds the price of model: its exact id, a provider-prefixed id
// ("openai/gpt-6.1-sol"), a dated snapshot ("gpt-6-sol-2026-09-22") or a
// dotted Claude version ("claude-sonnet-5.5"), case-insensitively.
func Lookup(model string) (Price, bool) {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	if strings.HasPrefix(m, "claude-") {
		m = strings.ReplaceAll(m, ".", "-")
	}
	var best Price
	found := false
	for _, p := range prices {
		if m == p.Model || (strings.HasPrefix(m, p.Model+"-") && datedSuffix(m[len(p.Model)+1:])) {
			if !found || len(p.Model) > len(best.Model) {
				best, found = p, true
			}
		}
	}
	return best, found
}

// datedSuffix reports whether s is a snapshot date: digits and dashes only.
func datedSuffix(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// Estimate prices u at model's standard API list price. ok is false, and
// the cost unknown, when the model is not in the table or u counts tokens of
// a kind whose price the table does not state. The estimate is what the same
// tokens cost through the vendor's API; a subscription (ChatGPT, Copilot
// premium requests) bills differently.
func Estimate(model string, u Usage) (cost float64, ok bool) {
	p, ok := Lookup(model)
	if !ok {
		return 0, false
	}
	long := min(max(u.CacheCreated1h, 0), u.CacheCreated)
	short := u.CacheCreated - long
	write, write1h := 0.0, 0.0
	if short > 0 {
		if p.CacheWrite == nil {
			return 0, false
		}
		write = *p.CacheWrite
	}
	if long > 0 {
		if p.CacheWrite1h == nil {
			return 0, false
		}
		write1h = *p.CacheWrite1h
	}
	const perToken = 1e-6
	cost = (float64(u.Input)*p.Input + float64(u.Cached)*p.Cached +
		float64(short)*write + float64(long)*write1h + float64(u.Output)*p.Output) * perToken
	return cost, true
}

// Priced returns u with an estimated cost when its cost is unknown and
// [Estimate] can price it for model; otherwise u unchanged.
func Priced(model string, u Usage) Usage {
	if u.CostKnown {
		return u
	}
	if cost, ok := Estimate(model, u); ok {
		u.CostUSD, u.CostKnown, u.CostSource = cost, true, CostSourceEstimate
	}
	return u
}
