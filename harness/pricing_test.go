package harness

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/usage"
)

func TestPriceTurn(t *testing.T) {
	tokens := usage.Usage{Input: 1_000_000, Output: 100_000, Complete: true}
	cases := []struct {
		name      string
		res       Result
		in        adapters.Input
		a         adapters.Adapter
		wantKnown bool
		wantCost  float64
		wantModel string
	}{
		{name: "codex default model", res: Result{Usage: tokens}, a: codex.New(),
			wantKnown: true, wantCost: 2.0 + 1.0, wantModel: codex.DefaultModel},
		{name: "input model wins over the default", res: Result{Usage: tokens}, in: adapters.Input{Model: "gpt-6-luna"},
			a: codex.New(), wantKnown: true, wantCost: 0.10 + 0.05, wantModel: "gpt-6-luna"},
		{name: "reported model wins", res: Result{Usage: tokens, Model: "gpt-6-astra"}, in: adapters.Input{Model: "gpt-6-luna"},
			a: codex.New(), wantKnown: true, wantCost: 10.0 + 5.0, wantModel: "gpt-6-astra"},
		{name: "custom endpoint: list prices say nothing", res: Result{Usage: tokens},
			in: adapters.Input{Endpoint: &adapters.Endpoint{BaseURL: "http://127.0.0.1:1"}}, a: codex.New()},
		{name: "unknown model", res: Result{Usage: tokens}, in: adapters.Input{Model: "outpost-unknown-model"}, a: codex.New(),
			wantModel: ""},
		{name: "no default model", res: Result{Usage: tokens}, a: claude.New()},
		{name: "no usage reported", res: Result{}, a: codex.New()},
		{name: "reported cost is kept", res: Result{Usage: usage.Usage{Output: 5, CostUSD: 0.5, CostKnown: true, CostSource: usage.CostSourceCLI}},
			a: codex.New(), wantKnown: true, wantCost: 0.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := c.res
			priceTurn(&res, c.in, c.a)
			assert.Equal(t, c.wantKnown, res.Usage.CostKnown)
			assert.InDelta(t, c.wantCost, res.Usage.CostUSD, 1e-9)
			if c.wantKnown && c.res.Usage.CostSource == "" {
				assert.Equal(t, usage.CostSourceEstimate, res.Usage.CostSource)
				assert.Equal(t, c.wantModel, res.Model)
			}
			if !c.wantKnown {
				assert.Empty(t, res.Usage.CostSource)
			}
		})
	}
}
