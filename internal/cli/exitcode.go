package cli

import "github.com/outpost-dev/outpost/outposterr"

// ExitCode is an exit status of the outpost command. The values are part of
// its documented interface (README, `outpost --help`).
type ExitCode int

// The exit codes.
const (
	ExitOK            ExitCode = 0
	ExitProcess       ExitCode = 1
	ExitConfiguration ExitCode = 2
	ExitQuota         ExitCode = 3
	ExitUnavailable   ExitCode = 4
	ExitAuth          ExitCode = 5
	ExitTimeout       ExitCode = 6
	ExitSandbox       ExitCode = 7
	ExitBootstrap     ExitCode = 8
	ExitSession       ExitCode = 9
	ExitProtocol      ExitCode = 10
	ExitInternal      ExitCode = 11
	ExitBudget        ExitCode = 12
	ExitAborted       ExitCode = 130
)

// exitHelp is the exit-code table every command's help shows.
const exitHelp = `Exit codes:
  0    success
  1    the agent CLI failed (process)
  2    configuration: bad flags, input or missing credentials
  3    quota: a usage limit was hit (see reset_at)
  4    the model service is unavailable (overload, 5xx, connection); retry later
  5    authentication failed (missing or rejected credentials)
  6    timeout (deadline or idle)
  7    sandbox: the sandbox engine or host execution failed, or the lease
       disappeared mid-turn (retryable)
  8    bootstrap: installing or verifying a CLI failed
  9    session: a conversation could not be found or restored
  10   protocol: the CLI's output broke its contract
  11   internal: a bug in Outpost (please report it)
  12   budget: a cost, token or turn cap you set stopped the work (--max-cost-usd, --max-tokens, --max-turns)
  130  aborted (interrupted); a signal gives 128 + its number: 129 SIGHUP,
       130 SIGINT, 131 SIGQUIT, 143 SIGTERM`

// classExits are the exit codes of the classes that have their own. A
// process error's code depends on its details (ExitCodeOf); every other
// class is here.
var classExits = map[outposterr.Class]ExitCode{
	outposterr.Configuration: ExitConfiguration,
	outposterr.Quota:         ExitQuota,
	outposterr.Timeout:       ExitTimeout,
	outposterr.Aborted:       ExitAborted,
	outposterr.Sandbox:       ExitSandbox,
	outposterr.Bootstrap:     ExitBootstrap,
	outposterr.Session:       ExitSession,
	outposterr.Protocol:      ExitProtocol,
	outposterr.Internal:      ExitInternal,
}

// ExitCodeOf maps err to the command's exit code. This is the only place
// that decision is made.
func ExitCodeOf(err error) ExitCode {
	if err == nil {
		return ExitOK
	}
	if code, ok := classExits[outposterr.ClassOf(err)]; ok {
		return code
	}
	if outposterr.IsBudget(err) {
		return ExitBudget
	}
	if outposterr.IsUnavailable(err) {
		return ExitUnavailable
	}
	if outposterr.IsAuth(err) {
		return ExitAuth
	}
	return ExitProcess
}

// classOfExit names the class of an outpost exit code, the reverse of
// ExitCodeOf: "" for success, process for its codes (1, 4, 5, 12) and any
// other code up to 128, aborted for a signal's.
func classOfExit(code int) string {
	if code == int(ExitOK) {
		return ""
	}
	for class, c := range classExits {
		if int(c) == code {
			return string(class)
		}
	}
	if code > 128 {
		return string(outposterr.Aborted)
	}
	return string(outposterr.Process)
}
