package harness

import (
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/usage"
)

// priceTurn gives a turn whose CLI reported no cost an estimate from the
// price table (usage.Estimate) when the model is known — reported by the
// CLI, named by the input, or the adapter's default — and the turn talked to
// the vendor's own service: with a custom endpoint (a local bridge, the
// scripted server, a BYOK provider) list prices say nothing, and the cost
// stays unknown. A turn that reported no usage stays unknown too.
func priceTurn(res *Result, in adapters.Input, a adapters.Adapter) {
	u := res.Usage
	if u.CostKnown || in.Endpoint != nil || (!u.Complete && u.Tokens() == 0) {
		return
	}
	model := res.Model
	if model == "" {
		model = in.Model
	}
	if model == "" {
		if d, ok := a.(adapters.DefaultModeler); ok {
			model = d.DefaultModel()
		}
	}
	if model == "" {
		return
	}
	if p := usage.Priced(model, u); p.CostKnown {
		res.Usage = p
		if res.Model == "" {
			res.Model = model
		}
	}
}
