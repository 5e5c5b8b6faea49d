package harness

import (
	"context"
	"fmt"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/usage"
)

// Bridge puts a model gateway between the lease and the model API for
// credentials that can stay outside the sandbox (credentials.Plan.Bridge:
// API keys, Claude's account token, a Copilot BYOK key). For such a turn the
// gateway holds the real credential in a grant for this turn only; the CLI
// gets the gateway's address and a placeholder key useless anywhere else,
// and the credential variable never reaches the lease. The gateway's wire
// measurements complete the turn's usage (a CLI that prints none gets
// exact figures) and add evidence to a failure's classification. A plan
// without a bridge (a login file the CLI refreshes itself) is installed
// in the lease as usual.
type Bridge struct {
	// Gateway is the running gateway (gateway.New, listening).
	Gateway *gateway.Gateway
	// Remote, when set, is used instead of Gateway and URL: the turn's
	// grant is opened on a gateway that runs beside the lease (a Kubernetes
	// pod's sidecar, see kubernetes.Provider.AcquireWithSidecar). It
	// returns that gateway's control client and its base URL as the lease
	// reaches it; it is called once the lease exists, for each attempt of
	// the turn.
	Remote func(ctx context.Context, sb sandbox.Sandbox) (*gateway.Remote, string, error)
	// URL is the gateway's base URL as the lease reaches it: the lease's
	// own loopback port of a sandbox.Forward (gateway.LeaseURL), or the
	// gateway's TCP address for the host sandbox.
	URL string
	// Upstream replaces the plan's upstream (a proxy, the scripted server
	// of a test); empty: the plan's, or the turn's Input.Endpoint when the
	// caller set one.
	Upstream string
	// Budget, when set, is a budget every turn on this bridge draws on
	// besides its own caps (Limits.MaxCostUSD, Limits.MaxTokens): the cap
	// of a whole batch, shared by its concurrent turns. Price prices the
	// responses (nil: list prices, gateway.ListPrice).
	Budget *gateway.Budget
	Price  gateway.PriceFunc
	// Endpoint also bridges a turn whose credential plan has nothing to
	// bridge but whose input names an endpoint (Input.Endpoint, such as
	// the offline scripted server): the endpoint's key is the credential
	// the gateway presents upstream, as a bearer token, and the CLI gets
	// the placeholder in the same place. Its turns then go through the
	// gateway as real ones do: measured, and capped where requests go.
	Endpoint bool
}

// turnBudget is the budget a turn's grants draw on: the turn's caps under
// the bridge's shared budget; nil when neither caps anything.
func (b *Bridge) turnBudget(l Limits) (*gateway.Budget, error) {
	if b == nil {
		return nil, nil
	}
	caps := gateway.Caps{USD: l.MaxCostUSD, Tokens: l.MaxTokens}
	if caps == (gateway.Caps{}) && b.Budget == nil {
		return nil, nil
	}
	bud, err := b.Budget.Sub(caps)
	if err != nil {
		return nil, asClass(err, outposterr.Configuration, "turn budget")
	}
	return bud, nil
}

// grantHandle is a grant on the runner's gateway or on a remote one.
type grantHandle interface {
	Placeholder() string
	Revoke()
	Snapshot() gateway.Snapshot
	// Refused is closed when the grant's budget first refuses a request.
	Refused() <-chan struct{}
}

// bridged is a turn's grant.
type bridged struct {
	grant  grantHandle
	budget *gateway.Budget
}

// over returns the budget's stop once it refuses requests (nil before).
func (br *bridged) over() *budgetHit {
	if br == nil || br.budget == nil {
		return nil
	}
	select {
	case <-br.grant.Refused():
	default:
		return nil
	}
	reason, msg := br.budget.Over()
	if reason == "" {
		// A remote gateway refused on its part of the budget; what it
		// measured is charged when the grant is revoked.
		reason, msg = "tokens", gateway.BudgetMarker+" at the gateway sidecar"
		if br.budget.CostCapped() {
			reason = "cost"
		}
	}
	return &budgetHit{reason: reason, text: "the gateway refused further requests: " + msg}
}

// grantFor opens the turn's grant for plan's bridge in lease sb and points
// in at the gateway; nil when the plan has nothing to bridge.
func (b *Bridge) grantFor(ctx context.Context, sb sandbox.Sandbox, label string, plan credentials.Plan, in *adapters.Input, budget *gateway.Budget) (*bridged, error) {
	if b == nil {
		return nil, nil
	}
	var (
		up    string
		cred  gateway.Credential
		oauth bool
	)
	switch {
	case plan.Bridge != nil:
		up = plan.Bridge.Upstream
		if in.Endpoint != nil {
			up = in.Endpoint.BaseURL
		}
		cred, oauth = gateway.Credential{Scheme: gateway.Scheme(plan.Bridge.Scheme), Secret: plan.Bridge.Secret}, plan.Bridge.OAuth
	case b.Endpoint && in.Endpoint != nil && in.Endpoint.APIKey+in.Endpoint.OAuthToken != "":
		up, oauth = in.Endpoint.BaseURL, in.Endpoint.OAuthToken != ""
		cred = gateway.Credential{Scheme: gateway.SchemeBearer, Secret: in.Endpoint.APIKey + in.Endpoint.OAuthToken}
	default:
		return nil, nil
	}
	if b.Upstream != "" {
		up = b.Upstream
	}
	price := b.Price
	if price == nil {
		price = gateway.ListPrice
	}
	spec := gateway.GrantSpec{Label: label, Upstream: up, Credential: cred, Price: price, Budget: budget}
	var (
		g   grantHandle
		url = b.URL
	)
	if b.Remote != nil {
		rem, u, err := b.Remote(ctx, sb)
		if err != nil {
			return nil, err
		}
		rg, err := rem.Grant(ctx, spec)
		if err != nil {
			return nil, err
		}
		g, url = rg, u
	} else {
		lg, err := b.Gateway.Grant(spec)
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "gateway grant")
		}
		g = lg
	}
	in.Endpoint = &adapters.Endpoint{BaseURL: url, APIKey: g.Placeholder()}
	if oauth {
		in.Endpoint = &adapters.Endpoint{BaseURL: url, OAuthToken: g.Placeholder()}
	}
	return &bridged{grant: g, budget: budget}, nil
}

// finish revokes the grant and folds what the gateway measured into res:
// usage when the CLI's own is incomplete, and the wire's evidence where
// the CLI's words left a failure unexplained.
func (br *bridged) finish(res *Result) {
	br.grant.Revoke()
	snap := br.grant.Snapshot()
	if snap.Requests > 0 && snap.Usage.Complete && snap.Usage.Tokens() > 0 {
		// The wire's measurement is the usage of record: it counts every
		// request the lease made, also those the CLI does not report (or
		// that did not come from the CLI at all).
		u := snap.Usage
		u.CostKnown = snap.Priced()
		u.CostSource = ""
		if u.CostKnown {
			u.CostSource = usage.CostSourceEstimate
		} else {
			u.CostUSD = 0
		}
		if res.Usage.Complete || res.Usage.Tokens() > 0 {
			cli := res.Usage
			res.CLIUsage = &cli
		}
		res.Usage, res.UsageSource = u, "gateway"
	} else if res.Err != nil && snap.Usage.Complete && snap.Usage.Tokens() == 0 &&
		res.Usage.Tokens() == 0 && res.Usage.CostUSD == 0 && !res.Usage.CostKnown {
		// A failed turn whose every request the wire saw consumed no
		// token (refused, failed, or none made) cost nothing, known; its
		// unknown cost would make a job's sum over its attempts unknown.
		res.Usage, res.UsageSource = usage.Usage{Complete: true, CostKnown: true}, "gateway"
	}
	if res.Err == nil {
		return
	}
	ev, ok := snap.Evidence()
	if !ok {
		return
	}
	oe, isOE := outposterr.As(res.Err)
	if !isOE || oe.Class != outposterr.Process || oe.Details.Auth != "" || oe.Details.Unavailable != "" {
		return // the CLI's words already explained it
	}
	switch ev.Kind {
	case gateway.EvidenceAuth:
		oe.Details.Auth = fmt.Sprintf("http %d", lastStatus(snap))
	case gateway.EvidenceOverloaded, gateway.EvidenceUnavailable, gateway.EvidenceServerError:
		oe.Details.Unavailable, oe.Details.Retryable = fmt.Sprintf("http %d", lastStatus(snap)), true
	case gateway.EvidenceBudget:
		oe.Message += " [outpost budget exceeded at the gateway]"
	}
}

func lastStatus(s gateway.Snapshot) int {
	if n := len(s.Statuses); n > 0 {
		return s.Statuses[n-1]
	}
	return 0
}
