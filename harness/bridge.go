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
	// Budget caps the cost of the turn's requests (nil: none); Price prices
	// them (nil: unpriced, and a budget then refuses every request).
	Budget *gateway.Budget
	Price  gateway.PriceFunc
}

// grantHandle is a grant on the runner's gateway or on a remote one.
type grantHandle interface {
	Placeholder() string
	Revoke()
	Snapshot() gateway.Snapshot
}

// bridged is a turn's grant.
type bridged struct {
	grant grantHandle
}

// grantFor opens the turn's grant for plan's bridge in lease sb and points
// in at the gateway; nil when the plan has nothing to bridge.
func (b *Bridge) grantFor(ctx context.Context, sb sandbox.Sandbox, label string, plan credentials.Plan, in *adapters.Input) (*bridged, error) {
	if b == nil || plan.Bridge == nil {
		return nil, nil
	}
	up := plan.Bridge.Upstream
	if in.Endpoint != nil {
		up = in.Endpoint.BaseURL
	}
	if b.Upstream != "" {
		up = b.Upstream
	}
	spec := gateway.GrantSpec{Label: label, Upstream: up,
		Credential: gateway.Credential{Scheme: gateway.Scheme(plan.Bridge.Scheme), Secret: plan.Bridge.Secret},
		Price:      b.Price, Budget: b.Budget}
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
	if plan.Bridge.OAuth {
		in.Endpoint = &adapters.Endpoint{BaseURL: url, OAuthToken: g.Placeholder()}
	}
	return &bridged{grant: g}, nil
}

// finish revokes the grant and folds what the gateway measured into res:
// usage when the CLI's own is incomplete, and the wire's evidence where
// the CLI's words left a failure unexplained.
func (br *bridged) finish(res *Result) {
	br.grant.Revoke()
	snap := br.grant.Snapshot()
	if snap.Requests > 0 && snap.Usage.Complete && (!res.Usage.Complete || res.Usage.Tokens() == 0) {
		u := snap.Usage
		if !u.CostKnown && len(snap.Models) == 1 {
			if p := usage.Priced(snap.Models[0], u); p.CostKnown {
				u = p
			}
		}
		res.Usage = u
		res.Warnings = append(res.Warnings, fmt.Sprintf("usage measured by the gateway (%d requests)", snap.Requests))
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
