// Command outpost runs coding-agent CLIs headless, one turn at a time, in
// sandboxes, and reports a normalized, classified result. See the README for
// the command reference and exit codes.
package main

import (
	"os"

	"github.com/outpost-dev/outpost/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
