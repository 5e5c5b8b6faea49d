package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/internal/lines"
	"github.com/outpost-dev/outpost/outposterr"
)

// stateEnv overrides Outpost's state directory, which holds each project's
// conversation store.
const stateEnv = outpost.StateEnv

// defaultStoreHelp describes the default store in help texts.
const defaultStoreHelp = "$" + stateEnv + "/projects/<project hash>/conversations; the state directory defaults to $XDG_STATE_HOME/outpost or ~/.local/state/outpost"

// keyEnv holds the optional conversation encryption key (32 bytes, hex or base64).
const keyEnv = "OUTPOST_CONVERSATION_KEY"

// openStore opens the conversation store in dir (empty: the project's
// default) with the key from OUTPOST_CONVERSATION_KEY, if set.
func openStore(f *Factory, dir, workspace string) (*conversation.FileStore, error) {
	key, err := outpost.ParseKey(f.Getenv(keyEnv))
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "%s", keyEnv)
	}
	project, err := os.Getwd()
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "find the current directory")
	}
	return outpost.OpenStore(outpost.StoreOptions{Dir: dir, Project: project, Workspace: workspace, Key: key, Getenv: f.Getenv})
}

// NewCmdConversations builds `outpost conversations`.
func NewCmdConversations(f *Factory) *cobra.Command {
	var dir string
	root := &cobra.Command{
		Use:   "conversations",
		Short: "List, show, export, import and remove stored conversations",
		Long: `Conversations are the agent CLIs' own session files, captured after every turn
into the project's store, outside the workspace (default ` + defaultStoreHelp + `:
one compressed archive and one manifest per conversation; encrypted at rest and bound
to its manifest when ` + keyEnv + ` holds a 32-byte key).
They are restored into fresh sandboxes by run --resume, resume and fork. An archive
holds only the files the agent keeps its conversation in; anything else is refused.`,
	}
	root.PersistentFlags().StringVar(&dir, "store", "", "conversation store directory (default: the project's store in the state directory)")
	store := func() (*conversation.FileStore, error) { return openStore(f, dir, "") }

	list := &cobra.Command{Use: "list", Short: "List stored conversations, newest first", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			ms, err := s.List(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(f.IO.Out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tAGENT\tUPDATED\tPARENT\tSTATE")
			for _, m := range ms {
				state := "ok"
				if m.Failed {
					state = "last turn failed"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.ID, m.Agent, m.Updated.Format(time.RFC3339), m.Parent, state)
			}
			return tw.Flush()
		}}
	show := &cobra.Command{Use: "show ID", Short: "Print a conversation's manifest as JSON", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			m, err := s.Stat(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			b, _ := json.MarshalIndent(m, "", "  ")
			fmt.Fprintln(f.IO.Out, string(b))
			return nil
		}}
	var out string
	export := &cobra.Command{Use: "export ID [--output FILE]", Short: "Write a conversation as a plain tar (verified, decrypted)", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			s, err := store()
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				return exportConversation(cmd.Context(), s, args[0], f.IO.Out)
			}
			return exportToFile(out, func(w io.Writer) error { return exportConversation(cmd.Context(), s, args[0], w) })
		}}
	export.Flags().StringVarP(&out, "output", "o", "", "output file (default: standard output)")
	var replace bool
	importCmd := &cobra.Command{Use: "import FILE", Short: "Import a conversation exported by `conversations export`", Args: exactArgs(1),
		Long: `import verifies an export before it stores anything: the manifest (at most 1 MiB),
the sha256 of the archive, and every file — only the files its agent keeps a
conversation in are accepted (no settings, hooks, shell startup files or links),
within the size and count limits. An id the store already holds is refused unless
--replace is given.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			m, err := importFile(cmd.Context(), f.Agents(), s, args[0], replace)
			if err != nil {
				return err
			}
			fmt.Fprintln(f.IO.Out, m.ID)
			return nil
		}}
	importCmd.Flags().BoolVar(&replace, "replace", false, "replace a stored conversation with the same id")
	rm := &cobra.Command{Use: "rm ID...", Short: "Remove stored conversations", Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			for _, id := range args {
				if err := s.Delete(cmd.Context(), id); err != nil {
					return err
				}
			}
			return nil
		}}
	root.AddCommand(list, show, export, importCmd, rm)
	return root
}

// exportToFile writes an export into path through a private temporary file
// in the same directory, which takes path's name only once the export is
// complete and synced: a failed or interrupted export leaves no file, empty
// or partial, at path. An existing path is never replaced.
func exportToFile(path string, write func(io.Writer) error) error {
	if _, err := os.Lstat(path); err == nil {
		return outposterr.New(outposterr.Configuration, "export: %s exists; choose another file or remove it", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "export")
	}
	defer os.Remove(tmp.Name()) // after the link, only the temporary name goes
	err = write(tmp)
	if err == nil {
		if err = tmp.Sync(); err != nil {
			err = outposterr.Wrap(outposterr.Configuration, err, "export")
		}
	}
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = outposterr.Wrap(outposterr.Configuration, cerr, "export")
	}
	if err != nil {
		return err
	}
	// A link, not a rename: a file that appeared at path meanwhile is
	// kept, and the export fails instead of replacing it.
	if err := os.Link(tmp.Name(), path); err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "export")
	}
	return nil
}

// An export is the manifest (one JSON line, the magic prefix first) followed
// by the plain tar of the conversation's files. The manifest's sha256 and
// size are those of the tar that follows.
const exportMagic = "outpost-conversation-v1 "

// exportConversation writes conversation id as an export. The archive is
// read twice (once for its digest, once to write it); a conversation that
// changed in between is an error.
func exportConversation(ctx context.Context, s *conversation.FileStore, id string, w io.Writer) error {
	digest := func(dst io.Writer) (conversation.Manifest, string, int64, error) {
		m, rc, err := s.Load(ctx, id)
		if err != nil {
			return m, "", 0, err
		}
		defer rc.Close()
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(h, dst), rc)
		if err != nil {
			if _, ok := outposterr.As(err); ok {
				return m, "", 0, err
			}
			return m, "", 0, outposterr.Wrap(outposterr.Session, err, "export %s", id)
		}
		return m, hex.EncodeToString(h.Sum(nil)), n, nil
	}
	m, sum, n, err := digest(io.Discard)
	if err != nil {
		return err
	}
	m.SHA256, m.Size, m.Encrypted = sum, n, false
	meta, _ := json.Marshal(m)
	if _, err := fmt.Fprintf(w, "%s%s\n", exportMagic, meta); err != nil {
		return outposterr.Wrap(outposterr.Session, err, "export %s", id)
	}
	_, again, _, err := digest(w)
	if err != nil {
		return err
	}
	if again != sum {
		return outposterr.New(outposterr.Session, "conversation %s changed during the export; export it again", id)
	}
	return nil
}

// importFile stores the export in file, streaming: see the import command.
func importFile(ctx context.Context, reg *agents.Registry, s *conversation.FileStore, file string, replace bool) (conversation.Manifest, error) {
	fh, err := os.Open(filepath.Clean(file))
	if err != nil {
		return conversation.Manifest{}, outposterr.Wrap(outposterr.Configuration, err, "import")
	}
	defer fh.Close()
	lr := lines.NewReader(fh, len(exportMagic)+conversation.MaxManifestBytes)
	lr.OversizedAtOnce()
	head, over, err := lr.Next()
	if err != nil || over || !lr.Ended() || !bytes.HasPrefix(head, []byte(exportMagic)) {
		return conversation.Manifest{}, outposterr.New(outposterr.Session, "%s is not an Outpost conversation export", file)
	}
	m, err := conversation.ParseManifest(head[len(exportMagic):])
	if err != nil {
		return m, outposterr.Wrap(outposterr.Session, err, "import %s", file)
	}
	if len(m.SHA256) != 64 {
		return m, outposterr.New(outposterr.Session, "import %s: the manifest has no sha256 of the archive", file)
	}
	a, err := reg.Adapter(m.Agent)
	if err != nil {
		return m, outposterr.Wrap(outposterr.Session, err, "import %s", file)
	}
	st, ok := a.(adapters.Storage)
	if !ok {
		return m, outposterr.New(outposterr.Session, "import %s: agent %s keeps no conversations", file, m.Agent)
	}
	return s.SaveWith(ctx, conversation.Manifest{ID: m.ID, Agent: m.Agent, CLIVersion: m.CLIVersion, Parent: m.Parent,
		Cwd: m.Cwd, Failed: m.Failed, UsageTotal: m.UsageTotal}, lr.Rest(),
		conversation.SaveOptions{Allow: conversation.Allowlist(st, m.ID, m.Cwd), SHA256: m.SHA256, NoReplace: !replace})
}
