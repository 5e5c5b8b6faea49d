package cli

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outpost-dev/outpost/internal/shquote"
)

// batchResumeCommand is the command that continues an interrupted batch:
// the same jobs file and every flag the invocation set, with --results
// naming its results file and --resume instead of --resume or
// --retry-failed (whose failures of this run must not run again), each
// word quoted for a POSIX shell.
func batchResumeCommand(cmd *cobra.Command, o *BatchOptions) string {
	words := []string{selfName(), "batch", o.Jobs}
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		switch fl.Name {
		case "resume", "retry-failed", "results":
			return
		}
		words = append(words, flagWords(fl)...)
	})
	words = append(words, "--results="+o.Results, "--resume")
	return shellJoin(words)
}

// flagWords are the words that set fl as it is set now: one --name=value
// per value of a repeatable flag, --name for a true boolean.
func flagWords(fl *pflag.Flag) []string {
	if sv, ok := fl.Value.(pflag.SliceValue); ok {
		var w []string
		for _, v := range sv.GetSlice() {
			w = append(w, "--"+fl.Name+"="+v)
		}
		return w
	}
	if fl.Value.Type() == "bool" && fl.Value.String() == "true" {
		return []string{"--" + fl.Name}
	}
	return []string{"--" + fl.Name + "=" + fl.Value.String()}
}

// selfName is how the user ran outpost (os.Args[0] when it is outpost, as
// typed: "outpost", "./outpost", a path), else "outpost".
func selfName() string {
	if len(os.Args) > 0 && filepath.Base(os.Args[0]) == "outpost" {
		return os.Args[0]
	}
	return "outpost"
}

// shellJoin quotes each word for a POSIX shell and joins them with spaces.
func shellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shquote.Arg(w)
	}
	return strings.Join(q, " ")
}
