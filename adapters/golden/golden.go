// Package golden reads and replays golden fixtures: runs of a real CLI
// captured once, one folder per case,
//
//	<case>/stdout.jsonl   what the CLI printed on stdout
//	<case>/stderr.txt     what it printed on stderr (optional)
//	<case>/meta.json      {"exit_code": N, "signal": "...", "time": RFC 3339, "source": "...", "cli_version": "..."}
//	<case>/expected.json  the normalized events and the outcome
//
// A case replays through [harness.Replay] — the same decoder, recognizers
// and classification a live turn uses. The conformance suite
// (adapters/adaptertest) compares every event; `outpost doctor` compares
// the outcome of the fixtures embedded in the binary.
package golden

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/sandbox"
)

// Meta describes a recorded case.
type Meta struct {
	ExitCode   int       `json:"exit_code"`
	Signal     string    `json:"signal,omitempty"`
	Time       time.Time `json:"time"`
	Source     string    `json:"source"`
	CLIVersion string    `json:"cli_version,omitempty"`
}

// Expected is a case's expected normalized output.
type Expected struct {
	Events  []adapters.Event `json:"events"`
	Outcome harness.Outcome  `json:"outcome"`
}

// Case is one loaded fixture.
type Case struct {
	// Name is the case folder's name; Dir its path in the file system it
	// was loaded from.
	Name, Dir string
	Stdout    []byte
	Stderr    []byte
	Meta      Meta
	// Expected is the raw expected.json; nil when the case has none yet.
	Expected []byte
}

// Load reads every case folder under dir of fsys; a folder without
// stdout.jsonl is not a case.
func Load(fsys fs.FS, dir string) ([]Case, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var cases []Case
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		cdir := path.Join(dir, e.Name())
		stdout, err := fs.ReadFile(fsys, path.Join(cdir, "stdout.jsonl"))
		if err != nil {
			continue
		}
		c := Case{Name: e.Name(), Dir: cdir, Stdout: stdout}
		c.Stderr, _ = fs.ReadFile(fsys, path.Join(cdir, "stderr.txt"))
		if b, err := fs.ReadFile(fsys, path.Join(cdir, "meta.json")); err == nil {
			if err := json.Unmarshal(b, &c.Meta); err != nil {
				return nil, fmt.Errorf("%s: meta.json: %w", c.Name, err)
			}
		}
		c.Expected, _ = fs.ReadFile(fsys, path.Join(cdir, "expected.json"))
		cases = append(cases, c)
	}
	return cases, nil
}

// Replay runs the case through the harness, keeping its events.
func (c Case) Replay(ctx context.Context, a adapters.Adapter) *harness.Result {
	return harness.Replay(ctx, a, harness.Recording{
		Stdout: bytes.NewReader(c.Stdout), Stderr: bytes.NewReader(c.Stderr),
		Exit: sandbox.ExitStatus{Code: c.Meta.ExitCode, Signal: c.Meta.Signal}, At: c.Meta.Time,
	}, nil, true)
}

// CheckOutcome replays the case and compares its outcome with the
// recorded one.
func (c Case) CheckOutcome(ctx context.Context, a adapters.Adapter) error {
	var want struct {
		Outcome json.RawMessage `json:"outcome"`
	}
	if c.Expected == nil || json.Unmarshal(c.Expected, &want) != nil || want.Outcome == nil {
		return fmt.Errorf("%s: no expected outcome", c.Name)
	}
	got, err := json.Marshal(c.Replay(ctx, a).Outcome())
	if err != nil {
		return err
	}
	if !jsonEqual(got, want.Outcome) {
		return fmt.Errorf("%s: outcome %s, recorded %s", c.Name, got, want.Outcome)
	}
	return nil
}

// CheckAll replays every case under dir of fsys and compares outcomes; it
// returns how many matched and the first mismatch.
func CheckAll(ctx context.Context, a adapters.Adapter, fsys fs.FS, dir string) (int, error) {
	cases, err := Load(fsys, dir)
	if err != nil {
		return 0, err
	}
	if len(cases) == 0 {
		return 0, errors.New("no fixtures")
	}
	for i, c := range cases {
		if err := c.CheckOutcome(ctx, a); err != nil {
			return i, err
		}
	}
	return len(cases), nil
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
