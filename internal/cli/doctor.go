package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/antigravity"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/driver"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// fixtures are the embedded golden fixtures per agent.
var fixtures = map[string]fs.FS{
	"claude": claude.Fixtures, "codex": codex.Fixtures, "antigravity": antigravity.Fixtures,
}

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
the Docker engine answers; the sandbox image exists; each pinned CLI is in the verified
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
	cmd.Flags().StringVar(&image, "image", docker.DefaultImage, "sandbox image to look for")
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
	// Engine and image.
	cli, err := docker.NewClient(f.Getenv("DOCKER_HOST"))
	if err == nil {
		defer cli.Close()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var v string
		if ping, perr := cli.Ping(pctx); perr != nil {
			err = outposterr.Wrap(outposterr.Sandbox, perr, "docker engine unreachable (start dockerd, or use --sandbox host)")
		} else {
			v = "API " + ping.APIVersion
		}
		cancel()
		add("docker engine", err, v)
		if err == nil {
			ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, ierr := cli.ImageInspect(ictx, image)
			cancel()
			if ierr != nil {
				ierr = fmt.Errorf("image %s missing: run scripts/docker-setup.sh or outpost image build", image)
			}
			add("image "+image, ierr, "present")
		}
	} else {
		add("docker engine", err, "")
	}
	// Pinned CLIs: cache, flags.
	b, berr := newBootstrapper(ctx, f, BootstrapOptions{NoNet: !download})
	names := make([]string, 0, len(agents))
	for n := range agents {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		a := agents[name]()
		row, pinned := bootstrap.DefaultCatalog().Row(a.Binary())
		if _, ok := row.Sources[bootstrap.HostPlatform()]; pinned && !ok {
			out = append(out, check{name: name + " CLI", ok: true,
				detail: "skipped: no pinned archive for this platform (pin one to bootstrap it)"})
			pinned = false
		}
		if pinned && berr == nil {
			e, err := b.Ensure(ctx, a.Binary())
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
		if fsys, ok := fixtures[name]; ok {
			n, err := replayFixtures(a, fsys)
			add(name+" protocol fixtures", err, fmt.Sprintf("%d recorded runs replay to their outcomes", n))
		}
	}
	if berr != nil {
		add("bootstrap", berr, "")
	}
	out = append(out, driverChecks()...)
	return out
}

// driverChecks validates every driver file of the project in the current
// directory: one check per file.
func driverChecks() []check {
	root, err := os.Getwd()
	if err != nil {
		return []check{{name: "drivers", detail: err.Error()}}
	}
	files, err := driver.LoadDir(root)
	if err != nil {
		return []check{{name: "drivers", detail: err.Error()}}
	}
	var out []check
	for _, f := range files {
		name := "driver " + filepath.Base(f.Path)
		switch {
		case f.Err != nil:
			out = append(out, check{name: name, detail: f.Err.Error()})
		case agents[f.Spec.ID] != nil:
			out = append(out, check{name: name, detail: fmt.Sprintf("id %q is a built-in agent; the driver would never run", f.Spec.ID)})
		default:
			out = append(out, check{name: name, ok: true, detail: fmt.Sprintf("%s: %s output, binary %s", f.Spec.ID, f.Spec.Output.Mode, f.Spec.Binary)})
		}
	}
	return out
}

// replayFixtures replays every embedded case and compares its outcome.
func replayFixtures(a adapters.Adapter, fsys fs.FS) (int, error) {
	dirs, err := fs.ReadDir(fsys, "testdata")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		dir := path.Join("testdata", d.Name())
		stdout, err := fs.ReadFile(fsys, path.Join(dir, "stdout.jsonl"))
		if err != nil {
			continue
		}
		stderr, _ := fs.ReadFile(fsys, path.Join(dir, "stderr.txt"))
		var meta struct {
			ExitCode int       `json:"exit_code"`
			Signal   string    `json:"signal"`
			Time     time.Time `json:"time"`
		}
		if b, err := fs.ReadFile(fsys, path.Join(dir, "meta.json")); err == nil {
			_ = json.Unmarshal(b, &meta)
		}
		var want struct {
			Outcome json.RawMessage `json:"outcome"`
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, "expected.json"))
		if err != nil || json.Unmarshal(b, &want) != nil {
			return n, fmt.Errorf("%s: no expected outcome", d.Name())
		}
		res := harness.Replay(a, harness.Recording{Stdout: bytes.NewReader(stdout), Stderr: bytes.NewReader(stderr),
			Exit: sandbox.ExitStatus{Code: meta.ExitCode, Signal: meta.Signal}, At: meta.Time}, nil, false)
		got, _ := json.Marshal(res.Outcome())
		if !jsonEqual(got, want.Outcome) {
			return n, fmt.Errorf("%s: outcome %s, recorded %s", d.Name(), got, want.Outcome)
		}
		n++
	}
	return n, nil
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ax, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return bytes.Equal(ax, by)
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
