package cli

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
)

// recipe is the sandbox image recipe `outpost init` writes; it is kept
// identical to the repository's own .outpost/ by a test.
//
//go:embed recipe/Dockerfile recipe/.dockerignore
var recipe embed.FS

// githubWorkflow is the pull-request workflow `outpost init --ci github`
// writes; {{VERSION}} becomes the release it pins.
//
//go:embed ciworkflow/outpost.yml
var githubWorkflow string

// GitHubWorkflowPath is where `outpost init --ci github` writes the workflow.
const GitHubWorkflowPath = ".github/workflows/outpost.yml"

// releaseTag matches a release version (v0.9.0).
var releaseTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// workflowVersion is the release the workflow pins: this binary's when it
// is a release, else a placeholder the user must replace.
func workflowVersion() (string, bool) {
	if releaseTag.MatchString(Version) {
		return Version, true
	}
	return "v0.0.0-set-the-release-you-use", false
}

// gitignoreLines are the runtime paths a project never commits.
var gitignoreLines = []string{".outpost/.env", ".outpost/conversations/"}

// NewCmdInit builds `outpost init`.
func NewCmdInit(f *Factory) *cobra.Command {
	var dir string
	var agentList []string
	var ci string
	cmd := &cobra.Command{
		Use:   "init [--agent NAME...] [--dir DIR] [--ci github]",
		Short: "Scaffold .outpost/: .env.example, the sandbox image recipe, .gitignore entries",
		Long: `init creates .outpost/ in the project: .env.example listing the variables each chosen
agent can use (copy it to .env and keep the names you declare; NAME= inherits the
value from your environment), the sandbox image recipe (Dockerfile, .dockerignore)
for "outpost image build", and .gitignore entries for the runtime folders. With
--ci github it also writes ` + GitHubWorkflowPath + `: the safe pull-request workflow
(same-repository pull requests only, the configuration from the base branch, the key in
the gateway, minimal permissions; see the README's CI section). Existing files are
kept, never overwritten.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ci != "" && ci != "github" {
				return &flagError{fmt.Errorf("--ci must be github, not %q", ci)}
			}
			if err := runInit(f, dir, agentList); err != nil {
				return err
			}
			if ci == "github" {
				return writeWorkflow(f, dir)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "project root")
	cmd.Flags().StringVar(&ci, "ci", "", "also write a CI workflow: github ("+GitHubWorkflowPath+")")
	cmd.Flags().StringSliceVar(&agentList, "agent", nil, "agents to prepare for (default: all)")
	return cmd
}

func runInit(f *Factory, dir string, agentList []string) error {
	od := filepath.Join(dir, ".outpost")
	if err := os.MkdirAll(od, 0o755); err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "create %s", od)
	}
	var env strings.Builder
	env.WriteString("# Variables this project declares for its agent sandboxes. Copy to .env and\n")
	env.WriteString("# keep what you use: NAME=value sets a value, NAME= inherits it from the\n")
	env.WriteString("# environment outpost runs in. Undeclared variables never reach a sandbox.\n")
	table, err := loadAgents(f)
	if err != nil {
		return err
	}
	if len(agentList) == 0 {
		agentList = table.Registry.Names()
	}
	for _, name := range agentList {
		row, err := table.Lookup(name)
		if err != nil {
			return err
		}
		d, ok := row.New().(adapters.Declarer)
		if !ok {
			continue
		}
		fmt.Fprintf(&env, "\n# %s\n", name)
		for _, v := range d.DeclaredVars() {
			fmt.Fprintf(&env, "# %s=\n", v)
		}
	}
	files := map[string][]byte{".env.example": []byte(env.String())}
	for _, name := range []string{"Dockerfile", ".dockerignore"} {
		b, err := fs.ReadFile(recipe, "recipe/"+name)
		if err != nil {
			return err
		}
		files[name] = b
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(od, n)
		fh, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if errors.Is(err, fs.ErrExist) {
			fmt.Fprintf(f.IO.Out, "kept     %s\n", p)
			continue
		}
		if err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "write %s", p)
		}
		_, werr := fh.Write(files[n])
		if cerr := fh.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return outposterr.Wrap(outposterr.Configuration, werr, "write %s", p)
		}
		fmt.Fprintf(f.IO.Out, "created  %s\n", p)
	}
	gi := filepath.Join(dir, ".gitignore")
	old, err := os.ReadFile(gi)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return outposterr.Wrap(outposterr.Configuration, err, "read %s", gi)
	}
	var add []string
	for _, l := range gitignoreLines {
		if !strings.Contains("\n"+string(old)+"\n", "\n"+l+"\n") {
			add = append(add, l)
		}
	}
	if len(add) > 0 {
		text := string(old)
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += strings.Join(add, "\n") + "\n"
		if err := os.WriteFile(gi, []byte(text), 0o644); err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "write %s", gi)
		}
		fmt.Fprintf(f.IO.Out, "updated  %s (%s)\n", gi, strings.Join(add, ", "))
	}
	return nil
}

// writeWorkflow writes the GitHub pull-request workflow, unless one is there.
func writeWorkflow(f *Factory, dir string) error {
	p := filepath.Join(dir, filepath.FromSlash(GitHubWorkflowPath))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "create %s", filepath.Dir(p))
	}
	version, known := workflowVersion()
	fh, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		fmt.Fprintf(f.IO.Out, "kept     %s\n", p)
		return nil
	}
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "write %s", p)
	}
	_, werr := fh.WriteString(strings.ReplaceAll(githubWorkflow, "{{VERSION}}", version))
	if cerr := fh.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return outposterr.Wrap(outposterr.Configuration, werr, "write %s", p)
	}
	fmt.Fprintf(f.IO.Out, "created  %s\n", p)
	if !known {
		fmt.Fprintf(f.IO.Out, "note: this outpost is a development build (%s): set the release to pin in %s (uses: outpost-dev/outpost@vX.Y.Z)\n", Version, p)
	}
	return nil
}
