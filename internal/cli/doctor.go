package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/golden"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// check is one doctor verdict.
type check struct {
	name   string
	ok     bool
	detail string
}

// NewCmdDoctor builds `outpost doctor`.
func NewCmdDoctor(f *Factory) *cobra.Command {
	var image string
	var download bool
	cmd := &cobra.Command{
		Use:   "doctor [--image I] [--download]",
		Short: "Check the engine, the image, the pinned CLIs, the protocol fixtures and the CLIs' flags",
		Long: `doctor reports one line per check, pass or fail, and exits non-zero when any fails:
each sandbox kind's engine answers (the Docker engine; Podman's service and the cluster
of $KUBECONFIG when there are any) and has the sandbox image; each pinned CLI is in the verified
cache (--download fetches what is missing); each adapter's golden fixtures replay to
their recorded outcomes; each cached CLI's --help still lists every flag its adapter
emits; each spec-defined driver in .outpost/drivers/ is valid.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := runDoctor(cmd.Context(), f, image, download)
			failed := 0
			for _, c := range checks {
				mark := "pass"
				if !c.ok {
					mark = "FAIL"
					failed++
				}
				fmt.Fprintf(f.IO.Out, "%s  %-40s %s\n", mark, c.name, c.detail)
			}
			if failed > 0 {
				return &silentError{outposterr.New(outposterr.Configuration, "%d checks failed", failed)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&image, "image", sandbox.DefaultImage, "sandbox image to look for")
	cmd.Flags().BoolVar(&download, "download", false, "bootstrap CLIs missing from the cache")
	return cmd
}

func runDoctor(ctx context.Context, f *Factory, image string, download bool) []check {
	var out []check
	add := func(name string, err error, detail string) {
		c := check{name: name, ok: err == nil, detail: detail}
		if err != nil {
			c.detail = err.Error()
		}
		out = append(out, c)
	}
	// Sandbox engines, kind by kind.
	for _, k := range f.Sandboxes.Sorted() {
		if k.Doctor == nil {
			continue
		}
		for _, c := range k.Doctor(ctx, sandbox.DoctorConfig{Image: image, Getenv: f.Getenv, Version: Version}) {
			out = append(out, check{name: c.Name, ok: c.OK, detail: c.Detail})
		}
	}
	out = append(out, gatewayDoctor(f.Agents().Upstreams(nil), f.Sandboxes.Sorted(), f.Self != nil && runtime.GOOS == "linux"))
	// Agents: pinned CLIs in the cache, their flags, their fixtures.
	table, terr := loadAgents(f)
	if terr != nil {
		add("agents", terr, "")
		return out
	}
	b, berr := newBootstrapper(ctx, f, BootstrapOptions{NoNet: !download})
	for _, row := range table.Registry.All() {
		if row.Driver != nil {
			continue // drivers are checked below, file by file
		}
		name := row.Name
		a := row.New()
		pinned := row.CLI != nil
		if pinned && row.CLI.Sources[bootstrap.HostPlatform()].Integrity == "" {
			out = append(out, check{name: name + " CLI", ok: true,
				detail: "skipped: no pinned archive for this platform (pin one to bootstrap it)"})
			pinned = false
		}
		if pinned && berr == nil {
			e, err := b.Ensure(ctx, row.CLI.Name)
			detail := ""
			if e != nil {
				detail = e.Version + " " + e.BinPath
			}
			add(name+" CLI in the verified cache", err, detail)
			if err == nil {
				missing, herr := missingFlags(ctx, a, e.BinPath)
				if herr == nil && len(missing) > 0 {
					herr = fmt.Errorf("--help no longer lists %s", strings.Join(missing, ", "))
				}
				add(name+" CLI flags", herr, "every flag the adapter emits is listed")
			}
		}
		if row.Fixtures == nil {
			add(name+" protocol fixtures", errors.New("the agent has no golden fixtures: capture some (see adapters/adaptertest)"), "")
			continue
		}
		n, err := golden.CheckAll(ctx, a, row.Fixtures, "testdata")
		add(name+" protocol fixtures", err, fmt.Sprintf("%d recorded runs replay to their outcomes", n))
	}
	if berr != nil {
		add("bootstrap", berr, "")
	}
	return append(out, driverChecks(table)...)
}

// gatewayDoctor starts the model gateway as a run would (a unix socket for
// container leases, loopback TCP for the host sandbox) and says, kind by
// kind, where credentials go; upstreams are the agents' default model
// APIs, binary says whether a gateway binary is at hand for sidecars.
func gatewayDoctor(upstreams []string, kinds []sandbox.Kind, binary bool) check {
	const name = "model gateway"
	fail := func(err error) check { return check{name: name, detail: err.Error()} }
	if len(upstreams) == 0 {
		// No agent's CLI goes through the gateway; the check still starts
		// its listeners (nothing is forwarded anywhere).
		upstreams = []string{"http://127.0.0.1"}
	}
	gw, err := gateway.New(gateway.Options{Upstreams: upstreams})
	if err != nil {
		return fail(err)
	}
	defer gw.Close()
	dir, err := os.MkdirTemp("", "outpost-doctor-gateway-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	if err := gw.ListenUnix(filepath.Join(dir, "gateway.sock")); err != nil {
		return fail(err)
	}
	if _, err := gw.ListenTCP("127.0.0.1:0"); err != nil {
		return fail(err)
	}
	var every, outside []string
	for _, k := range kinds {
		if k.GatewayHelp == nil {
			every = append(every, k.Name)
		} else if h := k.GatewayHelp(binary); h != "" {
			outside = append(outside, h)
		}
	}
	if len(every) > 0 {
		outside = append([]string{joinAnd(every) + " leases"}, outside...)
	}
	if len(outside) == 0 {
		return check{name: name, ok: true, detail: "no sandbox kind keeps API keys and tokens out of its leases: they go inside"}
	}
	return check{name: name, ok: true, detail: "API keys and tokens stay outside " + joinAnd(outside) +
		" with --credentials gateway; login files (--auth account) go inside"}
}

// joinAnd lists items as "a, b and c".
func joinAnd(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// driverChecks reports every driver file of the project: one check each.
func driverChecks(table *outpost.AgentTable) []check {
	var out []check
	for _, d := range table.Drivers {
		c := check{name: "driver " + filepath.Base(d.Path)}
		if d.Err != nil {
			c.detail = d.Err.Error()
		} else {
			s := d.Agent.Driver
			c.ok, c.detail = true, fmt.Sprintf("%s: %s output, binary %s", s.ID, s.Output.Mode, s.Binary)
		}
		out = append(out, c)
	}
	return out
}

var flagRE = regexp.MustCompile(`^--[a-z][a-z0-9-]*`)

// missingFlags builds a representative request (a new turn, a resume and a
// fork where supported) and reports the long flags it uses that the CLI's
// help does not mention. Help is read from `bin --help` and, for a
// subcommand the argv uses (codex exec), `bin SUB --help`.
func missingFlags(ctx context.Context, a adapters.Adapter, bin string) ([]string, error) {
	caps := a.Capabilities()
	inputs := []adapters.Input{{Prompt: "x", Model: "m"}}
	if caps.Resumable {
		inputs = append(inputs, adapters.Input{Prompt: "x", Continue: "abc-123"})
	}
	if caps.Forkable {
		inputs = append(inputs, adapters.Input{Prompt: "x", Continue: "abc-123", Fork: true})
	}
	if caps.StructuredOutput {
		inputs = append(inputs, adapters.Input{Prompt: "x", Schema: []byte(`{"type":"object"}`), Scratch: "/tmp/outpost-turn"})
	}
	help := map[string]string{}
	helpFor := func(args ...string) string {
		key := strings.Join(args, " ")
		if h, ok := help[key]; ok {
			return h
		}
		hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		c := exec.CommandContext(hctx, bin, append(args, "--help")...)
		outb, _ := c.CombinedOutput()
		help[key] = string(outb)
		return help[key]
	}
	seen := map[string]bool{}
	var missing []string
	for _, in := range inputs {
		cmd, err := a.Request(in)
		if err != nil {
			return nil, err
		}
		var sub []string
		for _, arg := range cmd.Args[1:] {
			if arg == "exec" || arg == "resume" || arg == "fork" {
				sub = append(sub, arg)
				continue
			}
			flag := flagRE.FindString(arg)
			if flag == "" || seen[flag] {
				continue
			}
			seen[flag] = true
			if !strings.Contains(helpFor(), flag) && (len(sub) == 0 || !strings.Contains(helpFor(sub...), flag)) {
				missing = append(missing, flag)
			}
		}
	}
	return missing, nil
}
