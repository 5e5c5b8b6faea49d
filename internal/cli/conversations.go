package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/outposterr"
)

// defaultStoreDir is where conversations are kept, relative to the project
// root (the current directory).
const defaultStoreDir = ".outpost/conversations"

// keyEnv holds the optional conversation encryption key (32 bytes, hex or base64).
const keyEnv = "OUTPOST_CONVERSATION_KEY"

// openStore opens the conversation store in dir (empty: the default) with
// the key from OUTPOST_CONVERSATION_KEY, if set.
func openStore(f *Factory, dir string) (*conversation.FileStore, error) {
	if dir == "" {
		dir = defaultStoreDir
	}
	var key []byte
	if v := strings.TrimSpace(f.Getenv(keyEnv)); v != "" {
		var err error
		if key, err = hex.DecodeString(v); err != nil || len(key) != 32 {
			if key, err = base64.StdEncoding.DecodeString(v); err != nil || len(key) != 32 {
				return nil, outposterr.New(outposterr.Configuration, "%s must be 32 bytes, hex or base64 encoded", keyEnv)
			}
		}
	}
	return conversation.NewFileStore(dir, key)
}

// NewCmdConversations builds `outpost conversations`.
func NewCmdConversations(f *Factory) *cobra.Command {
	var dir string
	root := &cobra.Command{
		Use:   "conversations",
		Short: "List, show, export, import and remove stored conversations",
		Long: `Conversations are the agent CLIs' own session files, captured after every turn
into the store (default .outpost/conversations: one compressed archive and one manifest
per conversation; encrypted at rest when ` + keyEnv + ` holds a 32-byte key).
They are restored into fresh sandboxes by run --resume, resume and fork.`,
	}
	root.PersistentFlags().StringVar(&dir, "store", "", "conversation store directory (default "+defaultStoreDir+")")
	store := func() (*conversation.FileStore, error) { return openStore(f, dir) }

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
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			m, rc, err := s.Load(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer rc.Close()
			w := f.IO.Out
			if out != "" && out != "-" {
				fh, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
				if err != nil {
					return outposterr.Wrap(outposterr.Configuration, err, "export")
				}
				defer fh.Close()
				w = fh
			}
			meta, _ := json.Marshal(m)
			if err := writeExport(w, meta, rc); err != nil {
				return outposterr.Wrap(outposterr.Session, err, "export %s", m.ID)
			}
			return nil
		}}
	export.Flags().StringVarP(&out, "output", "o", "", "output file (default: standard output)")
	importCmd := &cobra.Command{Use: "import FILE", Short: "Import a conversation exported by `conversations export`", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			m, err := importFile(cmd.Context(), s, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(f.IO.Out, m.ID)
			return nil
		}}
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

// An export is the manifest (one JSON line, the magic prefix first) followed
// by the plain tar of the conversation's files.
const exportMagic = "outpost-conversation-v1 "

func writeExport(w io.Writer, manifest []byte, tarStream io.Reader) error {
	if _, err := fmt.Fprintf(w, "%s%s\n", exportMagic, manifest); err != nil {
		return err
	}
	_, err := io.Copy(w, tarStream)
	return err
}

func importFile(ctx context.Context, s *conversation.FileStore, path string) (conversation.Manifest, error) {
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return conversation.Manifest{}, outposterr.Wrap(outposterr.Configuration, err, "import")
	}
	head, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok || !bytes.HasPrefix(head, []byte(exportMagic)) {
		return conversation.Manifest{}, outposterr.New(outposterr.Session, "%s is not an Outpost conversation export", path)
	}
	var m conversation.Manifest
	if err := json.Unmarshal(head[len(exportMagic):], &m); err != nil {
		return m, outposterr.Wrap(outposterr.Session, err, "import: manifest")
	}
	// The archive is checked entry by entry before anything is stored.
	if _, err := conversation.ReadFiles(bytes.NewReader(rest)); err != nil {
		return m, err
	}
	return s.Save(ctx, conversation.Manifest{ID: m.ID, Agent: m.Agent, CLIVersion: m.CLIVersion, Parent: m.Parent,
		Cwd: m.Cwd, Files: m.Files, Failed: m.Failed}, bytes.NewReader(rest))
}
