package harness

import (
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

// Validate checks a turn before anything runs, without a sandbox: the
// adapter is set, the input is well formed ([adapters.Input.Validate]), the
// adapter can resume, fork or take live input as asked, a typed response is
// not combined with live input, every variable an MCP server references is
// declared, the credential plan resolves, and the adapter accepts the
// request it will be asked to build. [Run] calls it first; callers that
// want to refuse a bad turn before preparing a sandbox (bootstrapping a
// CLI, starting an engine) call it themselves. Errors are configuration
// errors. The credential plan it resolves is kept on the turn, so Run does
// not plan again.
func (t *Turn) Validate() error {
	_, err := t.validate()
	return err
}

// CredentialPlan returns the turn's credential plan: the one made before
// (by Validate or an earlier call) for the same Credentials, or a new one,
// kept on the turn. A caller that routes the credential (a model gateway in
// front of it) asks here instead of planning again; errors are
// configuration errors.
func (t *Turn) CredentialPlan() (credentials.Plan, error) {
	if t.plan != nil && t.planFrom == t.Credentials {
		return *t.plan, nil
	}
	plan, err := planCredentials(*t)
	if err != nil {
		return credentials.Plan{}, err
	}
	t.plan, t.planFrom = &plan, t.Credentials
	return plan, nil
}

// validate is Validate, returning the credential plan it resolved: Run
// keeps it for the turn's attempts instead of planning again.
func (t *Turn) validate() (credentials.Plan, error) {
	var none credentials.Plan
	a := t.Adapter
	if a == nil {
		return none, outposterr.New(outposterr.Configuration, "turn has no adapter")
	}
	name := a.Name()
	if err := t.Input.Validate(); err != nil {
		return none, outposterr.Wrap(outposterr.Configuration, err, "%s", name)
	}
	caps := a.Capabilities()
	live, liveInput := a.(adapters.LiveInput)
	switch {
	case t.Input.Fork && !caps.Forkable:
		return none, outposterr.New(outposterr.Configuration, "%s does not support fork", name)
	case t.Input.Continue != "" && !caps.Resumable:
		return none, outposterr.New(outposterr.Configuration, "%s does not support resuming a conversation", name)
	case t.Live != nil && !liveInput && !caps.Resumable:
		return none, outposterr.New(outposterr.Configuration, "%s takes no live input into a running turn and cannot continue a conversation", name)
	case t.Live != nil && t.Schema != nil:
		return none, outposterr.New(outposterr.Configuration, "%s: a typed response cannot be combined with live input", name)
	case t.Seed != nil && (t.Sandbox != nil || t.Spec.Workspace != "" || t.Seed.Tar == nil):
		return none, outposterr.New(outposterr.Configuration, "%s: a seeded workspace needs a fresh lease of its own (Provider, no Spec.Workspace) and an archive", name)
	case t.Patch != nil && !validRev(t.Patch.Base):
		return none, outposterr.New(outposterr.Configuration, "%s: the patch base must be a commit id, not %q", name, t.Patch.Base)
	case t.Limits.MaxCostUSD < 0 || t.Limits.MaxTurns < 0 || t.Limits.MaxTokens < 0:
		return none, outposterr.New(outposterr.Configuration, "%s: negative cost, token or turn cap", name)
	}
	vars := t.Input.Env
	if t.Credentials != nil {
		vars = t.Credentials.Vars
	}
	if err := credentials.CheckMCPVars(name, t.Input.MCP, vars); err != nil {
		return none, err
	}
	plan, err := t.CredentialPlan()
	if err != nil {
		return none, err
	}
	// The adapter refuses an option its CLI cannot express; the declared
	// variables take part (a driver's secrets come from them).
	check := t.Input
	check.Env = vars
	if t.Schema != nil && caps.StructuredOutput {
		check.Schema = t.Schema.JSON()
	}
	if check.Scratch == "" {
		// The harness names the turn's scratch directory once a lease
		// exists; any absolute path builds the same command.
		check.Scratch = "/" + scratchPrefix + "check"
	}
	if t.Live != nil && liveInput {
		_, _, err = live.LiveRequest(check)
	} else {
		_, err = a.Request(check)
	}
	if err != nil {
		return none, asClass(err, outposterr.Configuration, name+": build request")
	}
	return plan, nil
}
