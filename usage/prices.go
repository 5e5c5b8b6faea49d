package usage

import (
	"strings"
)

// PricesVersion names the price table below: the date it was last checked
// as a whole. A changed price gets a new row date and a new version.
const PricesVersion = "2026-12-01"

// Price is a model's standard API list price in US dollars per million
// tokens. Figures the source does not state unambiguously are nil: a turn
// that used such a counter keeps an unknown cost.
type Price struct {
	// Model is the model id as its vendor's API names it.
	Model string
	// Input is uncached input; Cached is input read from the prompt cache;
	// CacheWrite is input written to the prompt cache (nil when the vendor
	// bills writes at several rates, e.g. by cache lifetime, and a CLI's
	// report does not say which); Output includes reasoning.
	Input, Cached, Output float64
	CacheWrite            *float64
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
	anthropicWrites   = "cache writes are billed by cache lifetime (5 min or 1 h), which usage reports do not say: a turn with cache writes keeps an unknown cost"
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
	// Claude models, for a CLI that runs one and reports no cost (Copilot
	// names them with dots: claude-sonnet-5.5).
	{Model: "claude-sonnet-5-5", Input: 2.00, Cached: 0.10, Output: 10.00,
		Source: "https://platform.claude.com/docs/en/about-claude/pricing", AsOf: "2026-12-01", Note: anthropicWrites},
	{Model: "claude-sonnet-5", Input: 2.00, Cached: 0.20, Output: 10.00,
		Source: "https://platform.claude.com/docs/en/about-claude/pricing", AsOf: "2026-12-01", Note: anthropicWrites},
	{Model: "claude-opus-5-5", Input: 4.00, Cached: 0.20, Output: 20.00,
		Source: "https://platform.claude.com/docs/en/about-claude/pricing", AsOf: "2026-12-01", Note: anthropicWrites},
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
	write := 0.0
	if u.CacheCreated > 0 {
		if p.CacheWrite == nil {
			return 0, false
		}
		write = *p.CacheWrite
	}
	const perToken = 1e-6
	cost = (float64(u.Input)*p.Input + float64(u.Cached)*p.Cached +
		float64(u.CacheCreated)*write + float64(u.Output)*p.Output) * perToken
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
