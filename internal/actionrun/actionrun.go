// Package actionrun runs a composite GitHub Action's steps on this machine
// as the GitHub Actions runner would, for tests: inputs and their defaults,
// the expressions the action uses (${{ inputs.X }}, ${{ github.X }},
// ${{ runner.X }}, ${{ steps.ID.outputs.X }}), each run step through
// `bash --noprofile --norc -eo pipefail` with the GITHUB_* files (a fresh
// GITHUB_OUTPUT and GITHUB_STEP_SUMMARY per step, GITHUB_ENV and
// GITHUB_PATH carried to the later steps), workflow commands read from
// the steps' output (::stop-commands:: honoured), and the action's outputs.
//
// It supports what Outpost's action.yml uses and refuses the rest (an
// expression with an operator or a function, an if:, a shell other than
// bash), so a test never passes on a feature it does not emulate. Steps that
// use another action (actions/cache) are not run: their with: values are
// evaluated and recorded.
//
// It also serves the two fakes the action's tests need: a release host
// (FileServer) and the GitHub comment API (FakeGitHub), on 127.0.0.1.
package actionrun

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Action is an action.yml.
type Action struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description"`
	Author      string            `yaml:"author"`
	Branding    map[string]string `yaml:"branding"`
	Inputs      map[string]Input  `yaml:"inputs"`
	Outputs     map[string]Output `yaml:"outputs"`
	Runs        struct {
		Using string `yaml:"using"`
		Steps []Step `yaml:"steps"`
	} `yaml:"runs"`
}

// Input is an action input.
type Input struct {
	Description string `yaml:"description"`
	Required    bool   `yaml:"required"`
	Default     string `yaml:"default"`
}

// Output is an action output.
type Output struct {
	Description string `yaml:"description"`
	Value       string `yaml:"value"`
}

// Step is a composite step.
type Step struct {
	ID               string            `yaml:"id"`
	Name             string            `yaml:"name"`
	If               string            `yaml:"if"`
	Shell            string            `yaml:"shell"`
	Run              string            `yaml:"run"`
	Uses             string            `yaml:"uses"`
	With             map[string]string `yaml:"with"`
	Env              map[string]string `yaml:"env"`
	WorkingDirectory string            `yaml:"working-directory"`
}

// Load reads and checks an action.yml.
func Load(path string) (*Action, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var a Action
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if a.Runs.Using != "composite" {
		return nil, fmt.Errorf("%s: runs.using is %q, not composite", path, a.Runs.Using)
	}
	for i, s := range a.Runs.Steps {
		switch {
		case s.If != "":
			return nil, fmt.Errorf("step %d (%s): if: is not emulated", i, s.ID)
		case s.Run != "" && s.Shell != "bash":
			return nil, fmt.Errorf("step %d (%s): shell %q is not emulated", i, s.ID, s.Shell)
		case (s.Run == "") == (s.Uses == ""):
			return nil, fmt.Errorf("step %d (%s): needs run or uses", i, s.ID)
		}
	}
	return &a, nil
}

// Runner is what GitHub gives the action's steps.
type Runner struct {
	// ActionPath is github.action_path (the directory of action.yml);
	// ActionRef is github.action_ref (the ref in uses:, "" for a local
	// action).
	ActionPath, ActionRef string
	// With are the inputs the workflow gives (uses: … with:).
	With map[string]string
	// Env is the environment the runner gives every step (PATH, HOME, the
	// workflow's env, and the GITHUB_* and RUNNER_* variables below are
	// added).
	Env map[string]string
	// Workspace, Temp and ToolCache are GITHUB_WORKSPACE, RUNNER_TEMP and
	// RUNNER_TOOL_CACHE; OS and Arch RUNNER_OS (Linux) and RUNNER_ARCH (X64).
	Workspace, Temp, ToolCache, OS, Arch string
	// Token is github.token.
	Token string
	// Github holds further github.* values (repository, event_path, …);
	// each is also set as GITHUB_<NAME>.
	Github map[string]string
	// Only, when set, names the steps to run; the others are skipped.
	Only []string
	// Log receives every step's output as it runs (nil: discarded).
	Log io.Writer
}

// StepResult is what one step did.
type StepResult struct {
	ID string
	// Outcome is success, failure or skipped ("uses" for a step of another
	// action, which is not run).
	Outcome string
	Outputs map[string]string
	// With are a uses: step's evaluated inputs.
	With   map[string]string
	Stdout string
}

// Command is a workflow command a step printed (::name props::message).
type Command struct {
	Name    string
	Props   map[string]string
	Message string
}

// Result is what the action did.
type Result struct {
	Steps []StepResult
	// Failed is the id of the step that failed ("" when none did).
	Failed string
	// Outputs are the action's outputs.
	Outputs map[string]string
	// Summary is every step's GITHUB_STEP_SUMMARY, in order.
	Summary string
	// Commands are the workflow commands the runner would act on.
	Commands []Command
	// Env is what the steps added with GITHUB_ENV; Path what they added
	// with GITHUB_PATH (first: the last added).
	Env  map[string]string
	Path []string
}

// Step returns the result of the step with this id.
func (r *Result) Step(id string) *StepResult {
	for i := range r.Steps {
		if r.Steps[i].ID == id {
			return &r.Steps[i]
		}
	}
	return nil
}

// Annotations returns the error, warning and notice commands.
func (r *Result) Annotations() []Command {
	var out []Command
	for _, c := range r.Commands {
		if c.Name == "error" || c.Name == "warning" || c.Name == "notice" {
			out = append(out, c)
		}
	}
	return out
}

var exprRe = regexp.MustCompile(`\$\{\{(.*?)\}\}`)
var refRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)+$`)

// eval substitutes the ${{ … }} of s: each must be a plain reference
// into the contexts (inputs.X, github.X, runner.X, steps.ID.outputs.X).
// A missing property is the empty string, as in GitHub.
func eval(s string, ctx map[string]map[string]string, steps map[string]map[string]string) (string, error) {
	var err error
	out := exprRe.ReplaceAllStringFunc(s, func(m string) string {
		ref := strings.TrimSpace(m[3 : len(m)-2])
		if !refRe.MatchString(ref) {
			err = fmt.Errorf("expression %q is not emulated (only context references)", ref)
			return ""
		}
		parts := strings.Split(ref, ".")
		if parts[0] == "steps" {
			if len(parts) != 4 || parts[2] != "outputs" {
				err = fmt.Errorf("expression %q: only steps.ID.outputs.NAME is emulated", ref)
				return ""
			}
			return steps[parts[1]][parts[3]]
		}
		c, ok := ctx[parts[0]]
		if !ok || len(parts) != 2 {
			err = fmt.Errorf("expression %q: context %s is not emulated", ref, parts[0])
			return ""
		}
		return c[parts[1]]
	})
	return out, err
}

// Run runs the action's steps in order until one fails.
func (a *Action) Run(ctx context.Context, r Runner) (*Result, error) {
	res := &Result{Outputs: map[string]string{}, Env: map[string]string{}}
	contexts := map[string]map[string]string{
		"github": {"action_path": r.ActionPath, "action_ref": r.ActionRef, "token": r.Token, "workspace": r.Workspace},
		"runner": {"os": r.OS, "arch": r.Arch, "temp": r.Temp, "tool_cache": r.ToolCache},
		"inputs": {},
	}
	for k, v := range r.Github {
		contexts["github"][k] = v
	}
	steps := map[string]map[string]string{}
	for name := range r.With {
		if _, ok := a.Inputs[name]; !ok {
			return nil, fmt.Errorf("input %q is not declared by the action", name)
		}
	}
	for name, in := range a.Inputs {
		v, given := r.With[name]
		if !given {
			if in.Required {
				return nil, fmt.Errorf("required input %q not given", name)
			}
			var err error
			if v, err = eval(in.Default, contexts, steps); err != nil {
				return nil, fmt.Errorf("input %s default: %w", name, err)
			}
		}
		contexts["inputs"][name] = v
	}
	base := map[string]string{}
	for k, v := range r.Env {
		base[k] = v
	}
	for k, v := range map[string]string{"GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_WORKSPACE": r.Workspace,
		"GITHUB_ACTION_PATH": r.ActionPath, "RUNNER_TEMP": r.Temp, "RUNNER_TOOL_CACHE": r.ToolCache,
		"RUNNER_OS": r.OS, "RUNNER_ARCH": r.Arch} {
		base[k] = v
	}
	for k, v := range r.Github {
		base["GITHUB_"+strings.ToUpper(k)] = v
	}
	files, err := os.MkdirTemp(r.Temp, "actionrun-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(files)
	envFile, pathFile := filepath.Join(files, "env"), filepath.Join(files, "path")
	for _, f := range []string{envFile, pathFile} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			return nil, err
		}
	}
	logw := r.Log
	if logw == nil {
		logw = io.Discard
	}
	stopped := false
	for i, s := range a.Runs.Steps {
		sr := StepResult{ID: s.ID, Outputs: map[string]string{}}
		if stopped || (len(r.Only) > 0 && !slices.Contains(r.Only, s.ID)) {
			sr.Outcome = "skipped"
			res.Steps = append(res.Steps, sr)
			continue
		}
		if s.Uses != "" {
			sr.Outcome, sr.With = "uses", map[string]string{}
			for k, v := range s.With {
				if sr.With[k], err = eval(v, contexts, steps); err != nil {
					return nil, fmt.Errorf("step %s with.%s: %w", s.ID, k, err)
				}
			}
			res.Steps = append(res.Steps, sr)
			continue
		}
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range res.Env {
			env[k] = v
		}
		for k, v := range s.Env {
			if env[k], err = eval(v, contexts, steps); err != nil {
				return nil, fmt.Errorf("step %s env.%s: %w", s.ID, k, err)
			}
		}
		if len(res.Path) > 0 {
			env["PATH"] = strings.Join(res.Path, string(os.PathListSeparator)) + string(os.PathListSeparator) + env["PATH"]
		}
		outFile, sumFile := filepath.Join(files, fmt.Sprintf("output-%d", i)), filepath.Join(files, fmt.Sprintf("summary-%d", i))
		script := filepath.Join(files, fmt.Sprintf("step-%d.sh", i))
		for _, f := range []string{outFile, sumFile} {
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				return nil, err
			}
		}
		// The runner writes run: into a file, with its expressions
		// substituted, and runs the shell on it.
		body, err := eval(s.Run, contexts, steps)
		if err != nil {
			return nil, fmt.Errorf("step %s run: %w", s.ID, err)
		}
		if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
			return nil, err
		}
		env["GITHUB_OUTPUT"], env["GITHUB_STEP_SUMMARY"], env["GITHUB_ENV"], env["GITHUB_PATH"] = outFile, sumFile, envFile, pathFile
		cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-eo", "pipefail", script)
		cmd.Dir = r.Workspace
		if s.WorkingDirectory != "" {
			wd, err := eval(s.WorkingDirectory, contexts, steps)
			if err != nil {
				return nil, err
			}
			cmd.Dir = wd
		}
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			cmd.Env = append(cmd.Env, k+"="+env[k])
		}
		var stdout bytes.Buffer
		cmd.Stdout = io.MultiWriter(&stdout, logw)
		cmd.Stderr = logw
		fmt.Fprintf(logw, "##[group]step %s: %s\n", s.ID, s.Name)
		runErr := cmd.Run()
		fmt.Fprintf(logw, "##[endgroup] step %s: %v\n", s.ID, runErr)
		sr.Stdout = stdout.String()
		res.Commands = append(res.Commands, parseCommands(sr.Stdout)...)
		if sr.Outputs, err = readKV(outFile); err != nil {
			return nil, fmt.Errorf("step %s GITHUB_OUTPUT: %w", s.ID, err)
		}
		sum, err := os.ReadFile(sumFile)
		if err != nil {
			return nil, err
		}
		res.Summary += string(sum)
		if s.ID != "" {
			steps[s.ID] = sr.Outputs
		}
		sr.Outcome = "success"
		if runErr != nil {
			var ee *exec.ExitError
			if !errors.As(runErr, &ee) {
				return nil, fmt.Errorf("step %s: %w", s.ID, runErr)
			}
			sr.Outcome, res.Failed, stopped = "failure", s.ID, true
		}
		res.Steps = append(res.Steps, sr)
		// GITHUB_ENV and GITHUB_PATH reach the later steps.
		kv, err := readKV(envFile)
		if err != nil {
			return nil, fmt.Errorf("step %s GITHUB_ENV: %w", s.ID, err)
		}
		res.Env = kv
		pb, err := os.ReadFile(pathFile)
		if err != nil {
			return nil, err
		}
		res.Path = nil
		for _, l := range strings.Split(strings.TrimSpace(string(pb)), "\n") {
			if l != "" {
				res.Path = append([]string{l}, res.Path...)
			}
		}
	}
	if res.Failed == "" {
		for name, o := range a.Outputs {
			if res.Outputs[name], err = eval(o.Value, contexts, steps); err != nil {
				return nil, fmt.Errorf("output %s: %w", name, err)
			}
		}
	}
	return res, nil
}

// readKV reads a GITHUB_OUTPUT or GITHUB_ENV file: NAME=VALUE lines and
// NAME<<DELIMITER blocks.
func readKV(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if name, delim, ok := strings.Cut(line, "<<"); ok && !strings.Contains(name, "=") {
			var val []string
			closed := false
			for sc.Scan() {
				if sc.Text() == delim {
					closed = true
					break
				}
				val = append(val, sc.Text())
			}
			if !closed {
				return nil, fmt.Errorf("%s: no closing %s", name, delim)
			}
			out[name] = strings.Join(val, "\n")
			continue
		}
		name, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %q is neither NAME=VALUE nor NAME<<DELIMITER", line)
		}
		out[name] = val
	}
	return out, sc.Err()
}

var unescapeData = strings.NewReplacer("%0D", "\r", "%0A", "\n", "%25", "%")
var unescapeProp = strings.NewReplacer("%0D", "\r", "%0A", "\n", "%3A", ":", "%2C", ",", "%25", "%")

// parseCommands reads the workflow commands of a step's output as the
// runner does: ::name k=v,k=v::message lines, none between
// ::stop-commands::TOKEN and ::TOKEN::.
func parseCommands(out string) []Command {
	var cmds []Command
	stop := ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		if !strings.HasPrefix(line, "::") {
			continue
		}
		head, msg, ok := strings.Cut(line[2:], "::")
		if !ok {
			continue
		}
		if stop != "" {
			if head == stop && msg == "" {
				stop = ""
			}
			continue
		}
		name, props, _ := strings.Cut(head, " ")
		if name == "stop-commands" {
			stop = msg
			continue
		}
		c := Command{Name: name, Props: map[string]string{}, Message: unescapeData.Replace(msg)}
		for _, p := range strings.Split(props, ",") {
			if k, v, ok := strings.Cut(p, "="); ok {
				c.Props[k] = unescapeProp.Replace(v)
			}
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// Masks returns the values the steps asked to mask (::add-mask::).
func (r *Result) Masks() []string {
	var out []string
	for _, c := range r.Commands {
		if c.Name == "add-mask" {
			out = append(out, c.Message)
		}
	}
	return out
}
