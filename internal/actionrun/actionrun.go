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
	ar, err := a.newRun(r)
	if err != nil {
		return nil, err
	}
	files, err := os.MkdirTemp(r.Temp, "actionrun-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(files)
	if err := ar.createFiles(files); err != nil {
		return nil, err
	}
	res := ar.res
	stopped := false
	for i, s := range a.Runs.Steps {
		var sr StepResult
		switch {
		case stopped || (len(r.Only) > 0 && !slices.Contains(r.Only, s.ID)):
			sr = StepResult{ID: s.ID, Outputs: map[string]string{}, Outcome: "skipped"}
		case s.Uses != "":
			sr, err = ar.uses(s)
		default:
			sr, err = ar.run(ctx, i, s)
		}
		if err != nil {
			return nil, err
		}
		res.Steps = append(res.Steps, sr)
		if sr.Outcome == "failure" {
			stopped = true
		}
	}
	if res.Failed == "" {
		for name, o := range a.Outputs {
			if res.Outputs[name], err = eval(o.Value, ar.contexts, ar.steps); err != nil {
				return nil, fmt.Errorf("output %s: %w", name, err)
			}
		}
	}
	return res, nil
}

// actionRun is one Run of an action: what its expressions see, what its
// steps are given, and what they did so far.
type actionRun struct {
	r Runner
	// contexts are the github, runner and inputs expression contexts;
	// steps the outputs of the steps run so far, by id.
	contexts, steps map[string]map[string]string
	// base is the environment of every step, before GITHUB_ENV and the
	// step's env:.
	base map[string]string
	// envFile and pathFile are the GITHUB_ENV and GITHUB_PATH all steps
	// share; files is the directory of those and of each step's files.
	files, envFile, pathFile string
	// logw receives the steps' output (io.Discard: no Runner.Log).
	logw io.Writer
	res  *Result
}

// newRun resolves the expression contexts, the inputs (a given input the
// action does not declare, or a required one not given, is an error; the
// others take their evaluated default) and the base environment: the
// Runner's, with the GITHUB_*, RUNNER_* and CI variables the runner sets.
func (a *Action) newRun(r Runner) (*actionRun, error) {
	ar := &actionRun{
		r: r,
		contexts: map[string]map[string]string{
			"github": {"action_path": r.ActionPath, "action_ref": r.ActionRef, "token": r.Token, "workspace": r.Workspace},
			"runner": {"os": r.OS, "arch": r.Arch, "temp": r.Temp, "tool_cache": r.ToolCache},
			"inputs": {},
		},
		steps: map[string]map[string]string{},
		base:  map[string]string{},
		logw:  r.Log,
		res:   &Result{Outputs: map[string]string{}, Env: map[string]string{}},
	}
	for k, v := range r.Github {
		ar.contexts["github"][k] = v
	}
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
			if v, err = eval(in.Default, ar.contexts, ar.steps); err != nil {
				return nil, fmt.Errorf("input %s default: %w", name, err)
			}
		}
		ar.contexts["inputs"][name] = v
	}
	for k, v := range r.Env {
		ar.base[k] = v
	}
	for k, v := range map[string]string{"GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_WORKSPACE": r.Workspace,
		"GITHUB_ACTION_PATH": r.ActionPath, "RUNNER_TEMP": r.Temp, "RUNNER_TOOL_CACHE": r.ToolCache,
		"RUNNER_OS": r.OS, "RUNNER_ARCH": r.Arch} {
		ar.base[k] = v
	}
	for k, v := range r.Github {
		ar.base["GITHUB_"+strings.ToUpper(k)] = v
	}
	if ar.logw == nil {
		ar.logw = io.Discard
	}
	return ar, nil
}

// createFiles makes the empty GITHUB_ENV and GITHUB_PATH files in files,
// the run's directory.
func (ar *actionRun) createFiles(files string) error {
	ar.files = files
	ar.envFile, ar.pathFile = filepath.Join(files, "env"), filepath.Join(files, "path")
	for _, f := range []string{ar.envFile, ar.pathFile} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// uses records a step of another action, which is not run: its with:
// values, evaluated.
func (ar *actionRun) uses(s Step) (StepResult, error) {
	sr := StepResult{ID: s.ID, Outputs: map[string]string{}, Outcome: "uses", With: map[string]string{}}
	for k, v := range s.With {
		var err error
		if sr.With[k], err = eval(v, ar.contexts, ar.steps); err != nil {
			return sr, fmt.Errorf("step %s with.%s: %w", s.ID, k, err)
		}
	}
	return sr, nil
}

// run runs step i, a run: step, as the runner does (see bash), and reads back
// what it left: its outputs, summary and workflow commands, its outcome
// (failure when bash exits non-zero; res.Failed names it), and the
// GITHUB_ENV and GITHUB_PATH the later steps get.
func (ar *actionRun) run(ctx context.Context, i int, s Step) (StepResult, error) {
	sr := StepResult{ID: s.ID, Outputs: map[string]string{}}
	res := ar.res
	outFile, sumFile := filepath.Join(ar.files, fmt.Sprintf("output-%d", i)), filepath.Join(ar.files, fmt.Sprintf("summary-%d", i))
	stdout, runErr, err := ar.bash(ctx, i, s, outFile, sumFile)
	if err != nil {
		return sr, err
	}
	sr.Stdout = stdout
	res.Commands = append(res.Commands, parseCommands(sr.Stdout)...)
	if sr.Outputs, err = readKV(outFile); err != nil {
		return sr, fmt.Errorf("step %s GITHUB_OUTPUT: %w", s.ID, err)
	}
	sum, err := os.ReadFile(sumFile)
	if err != nil {
		return sr, err
	}
	res.Summary += string(sum)
	if s.ID != "" {
		ar.steps[s.ID] = sr.Outputs
	}
	sr.Outcome = "success"
	if runErr != nil {
		var ee *exec.ExitError
		if !errors.As(runErr, &ee) {
			return sr, fmt.Errorf("step %s: %w", s.ID, runErr)
		}
		sr.Outcome, res.Failed = "failure", s.ID
	}
	return sr, ar.carry(s)
}

// stepEnv is step s's environment: the base, what the earlier steps added
// with GITHUB_ENV and GITHUB_PATH, and s's env:, evaluated.
func (ar *actionRun) stepEnv(s Step) (map[string]string, error) {
	env := map[string]string{}
	for k, v := range ar.base {
		env[k] = v
	}
	for k, v := range ar.res.Env {
		env[k] = v
	}
	for k, v := range s.Env {
		var err error
		if env[k], err = eval(v, ar.contexts, ar.steps); err != nil {
			return nil, fmt.Errorf("step %s env.%s: %w", s.ID, k, err)
		}
	}
	if len(ar.res.Path) > 0 {
		env["PATH"] = strings.Join(ar.res.Path, string(os.PathListSeparator)) + string(os.PathListSeparator) + env["PATH"]
	}
	return env, nil
}

// bash runs step i's run: with `bash --noprofile --norc -eo pipefail`
// in its working directory, with fresh, empty outFile and sumFile as its
// GITHUB_OUTPUT and GITHUB_STEP_SUMMARY, and returns its stdout and how
// bash ended (runErr); err is a step that could not be run.
func (ar *actionRun) bash(ctx context.Context, i int, s Step, outFile, sumFile string) (stdout string, runErr, err error) {
	env, err := ar.stepEnv(s)
	if err != nil {
		return "", nil, err
	}
	script := filepath.Join(ar.files, fmt.Sprintf("step-%d.sh", i))
	for _, f := range []string{outFile, sumFile} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			return "", nil, err
		}
	}
	// The runner writes run: into a file, with its expressions
	// substituted, and runs the shell on it.
	body, err := eval(s.Run, ar.contexts, ar.steps)
	if err != nil {
		return "", nil, fmt.Errorf("step %s run: %w", s.ID, err)
	}
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		return "", nil, err
	}
	env["GITHUB_OUTPUT"], env["GITHUB_STEP_SUMMARY"], env["GITHUB_ENV"], env["GITHUB_PATH"] = outFile, sumFile, ar.envFile, ar.pathFile
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-eo", "pipefail", script)
	cmd.Dir = ar.r.Workspace
	if s.WorkingDirectory != "" {
		wd, err := eval(s.WorkingDirectory, ar.contexts, ar.steps)
		if err != nil {
			return "", nil, err
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
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, ar.logw)
	cmd.Stderr = ar.logw
	fmt.Fprintf(ar.logw, "##[group]step %s: %s\n", s.ID, s.Name)
	runErr = cmd.Run()
	fmt.Fprintf(ar.logw, "##[endgroup] step %s: %v\n", s.ID, runErr)
	return out.String(), runErr, nil
}

// carry reads back GITHUB_ENV and GITHUB_PATH after step s: they reach
// the later steps (the path last added first).
func (ar *actionRun) carry(s Step) error {
	kv, err := readKV(ar.envFile)
	if err != nil {
		return fmt.Errorf("step %s GITHUB_ENV: %w", s.ID, err)
	}
	ar.res.Env = kv
	pb, err := os.ReadFile(ar.pathFile)
	if err != nil {
		return err
	}
	ar.res.Path = nil
	for _, l := range strings.Split(strings.TrimSpace(string(pb)), "\n") {
		if l != "" {
			ar.res.Path = append([]string{l}, ar.res.Path...)
		}
	}
	return nil
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
