package cli

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// gitignoreLines are the runtime paths a project never commits.
var gitignoreLines = []string{".outpost/.env", ".outpost/conversations/"}

// NewCmdInit builds `outpost init`.
func NewCmdInit(f *Factory) *cobra.Command {
	var dir string
	var agentList []string
	cmd := &cobra.Command{
		Use:   "init [--agent NAME...] [--dir DIR]",
		Short: "Scaffold .outpost/: .env.example, the sandbox image recipe, .gitignore entries",
		Long: `init creates .outpost/ in the project: .env.example listing the variables each chosen
agent can use (copy it to .env and keep the names you declare; NAME= inherits the
value from your environment), the sandbox image recipe (Dockerfile, .dockerignore)
for "outpost image build", and .gitignore entries for the runtime folders. Existing
files are kept, never overwritten.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInit(f, dir, agentList)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "project root")
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
