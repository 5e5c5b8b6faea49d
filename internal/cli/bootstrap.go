package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/internal/progress"
	"github.com/outpost-dev/outpost/outposterr"
)

// Settings for bootstrap, read from the environment.
const (
	registryEnv = outpost.RegistryEnv
	mirrorEnv   = outpost.MirrorEnv
)

// BootstrapOptions are the flags of `outpost bootstrap`.
type BootstrapOptions struct {
	Registry string
	Mirror   string
	NoNet    bool
	// Print lists the npm launchers of the pins instead of fetching.
	Print bool
}

// newBootstrapper builds the bootstrapper from flags and settings.
func newBootstrapper(ctx context.Context, f *Factory, o BootstrapOptions) (*bootstrap.Bootstrapper, error) {
	wd, _ := os.Getwd()
	return outpost.NewBootstrapper(ctx, outpost.BootstrapOptions{Registry: o.Registry, Mirror: o.Mirror, Offline: o.NoNet,
		Project: wd, Getenv: f.Getenv, Progress: progressFunc(f.IO.ErrOut, isTerminal(f.IO.ErrOut)),
		HTTPClient: &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}, Agents: f.Agents()})
}

// NewCmdBootstrap builds `outpost bootstrap`.
func NewCmdBootstrap(f *Factory) *cobra.Command {
	var o BootstrapOptions
	cmd := &cobra.Command{
		Use:   "bootstrap [AGENT...]",
		Short: "Download, verify (SHA-512) and cache the pinned agent CLIs",
		Long: `bootstrap fetches the pinned CLIs (default: every npm-distributed one: ` + strings.Join(defaultCLIs(f.Agents()), ", ") + `)
into the host cache, verifying each archive's SHA-512 against the pin before
anything is extracted. The npm registry comes from ` + registryEnv + ` or --registry, else npm's
own configuration (NPM_CONFIG_REGISTRY, .npmrc, npm config get registry). run does
the same on demand, so this is only a prefetch.

--print fetches nothing: it prints, one line per CLI, how npm installs the pin by
hand, as COMMAND|PACKAGE@VERSION|EXECUTABLE UNDER node_modules|VERSION LINE
(scripts/install-clis.sh reads it; an npm install is not checked against the pins).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			reg := f.Agents()
			if len(args) == 0 {
				args = defaultCLIs(reg)
			}
			if o.Print {
				return printLaunchers(f.IO.Out, reg, args)
			}
			b, err := newBootstrapper(cmd.Context(), f, o)
			if err != nil {
				return err
			}
			var errs []string
			for _, name := range args {
				e, err := b.Ensure(cmd.Context(), cliName(reg, name))
				if err != nil {
					errs = append(errs, err.Error())
					fmt.Fprintf(f.IO.ErrOut, "✖ %s: %v\n", name, err)
					continue
				}
				fmt.Fprintf(f.IO.Out, "%s %s %s %s\n", e.Name, e.Version, e.Platform, e.BinPath)
			}
			if len(errs) > 0 {
				return &silentError{outposterr.New(outposterr.Bootstrap, "%s", strings.Join(errs, "; "))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Registry, "registry", "", "npm registry URL (default: "+registryEnv+", then npm's configuration)")
	cmd.Flags().StringVar(&o.Mirror, "mirror", "", "directory of archives to use instead of the network ("+mirrorEnv+")")
	cmd.Flags().BoolVar(&o.NoNet, "no-download", false, "use only the cache and the mirror")
	cmd.Flags().BoolVar(&o.Print, "print", false, "print how npm installs each pin (COMMAND|PACKAGE@VERSION|EXECUTABLE|VERSION LINE) and fetch nothing")
	return cmd
}

// defaultCLIs are the agents `outpost bootstrap` fetches without arguments:
// the rows marked Default that have a pinned CLI.
func defaultCLIs(reg *agents.Registry) []string {
	var out []string
	for _, a := range reg.All() {
		if a.Default && a.CLI != nil {
			out = append(out, a.Name)
		}
	}
	return out
}

// printLaunchers writes the npm launcher line of each named agent's pin for
// the host platform; an agent without one is a configuration error.
func printLaunchers(w io.Writer, reg *agents.Registry, names []string) error {
	var lines []string
	for _, name := range names {
		a, ok := reg.Lookup(name)
		if !ok || a.CLI == nil {
			return outposterr.New(outposterr.Configuration, "%s: no pinned CLI (agents with one: %s)", name, strings.Join(pinnedCLIs(reg), ", "))
		}
		spec, bin, ok := a.CLI.NPMLauncher(bootstrap.HostPlatform())
		if !ok {
			return outposterr.New(outposterr.Configuration, "%s: the pin has no npm package for %s", name, bootstrap.HostPlatform())
		}
		fields := []string{a.CLI.Command(), spec, bin, a.CLI.WantVersion()}
		for _, fl := range fields {
			if strings.ContainsAny(fl, "|\r\n") {
				return outposterr.New(outposterr.Configuration, "%s: the pin's field %q cannot be printed on one line", name, fl)
			}
		}
		lines = append(lines, strings.Join(fields, "|"))
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return nil
}

// pinnedCLIs are the agents with a pinned CLI.
func pinnedCLIs(reg *agents.Registry) []string {
	var out []string
	for _, a := range reg.All() {
		if a.CLI != nil {
			out = append(out, a.Name)
		}
	}
	return out
}

// cliName maps an agent name to its catalog row's name.
func cliName(reg *agents.Registry, agent string) string {
	if a, ok := reg.Lookup(agent); ok && a.CLI != nil {
		return a.CLI.Name
	}
	return agent
}

func isTerminal(w io.Writer) bool {
	fh, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := fh.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressFunc shows download progress on one status line
// (internal/progress: throttled, in place on a terminal, periodic plain
// lines otherwise), one line per verified CLI above it.
func progressFunc(w io.Writer, tty bool) func(bootstrap.Progress) {
	var mu sync.Mutex
	var line *progress.Line
	return func(p bootstrap.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if line == nil {
			line = progress.New(w, tty, 0)
		}
		label := p.Name + " " + p.Version
		switch {
		case p.Phase == "download" && p.Total > 0:
			line.Set(fmt.Sprintf("MB %s", label), int(p.Done>>20), int(p.Total>>20))
		case p.Phase == "download":
			line.Set(fmt.Sprintf("%s: %d MB", label, p.Done>>20), 0, 0)
		case p.Phase == "done":
			line.Logf("%s verified and cached", label)
			line.Close()
			line = nil
		default:
			line.Set(label+": "+p.Phase, 0, 0)
		}
	}
}
