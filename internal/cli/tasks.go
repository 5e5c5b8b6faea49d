package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/source"
)

// A task directory is one task in files, the way terminal-bench and Harbor
// lay tasks out:
//
//	TASK/instruction.md          the prompt
//	TASK/task.json               the job's other fields (may be {})
//	TASK/environment/Dockerfile  optional: the image the agent and the verifier run on
//	TASK/tests/                  optional: hidden test files, copied into the workspace
//	                             root before grading; tests/test.sh is the default command
//	TASK/workspace/              optional: a git repository, the default source
const (
	taskInstruction = "instruction.md"
	taskConfig      = "task.json"
	taskEnvironment = "environment"
	taskTests       = "tests"
	taskTestScript  = "test.sh"
	taskWorkspace   = "workspace"
	// maxTaskFile bounds instruction.md and task.json.
	maxTaskFile = 4 << 20
)

// readJobsOrTasks reads path as a task directory (or a directory of them)
// when it is a directory, else as a jobs file ("-": stdin).
func readJobsOrTasks(path string, stdin io.Reader, o *BatchOptions) ([]batch.Job, error) {
	if path != "-" && isDir(path) {
		return readTasks(path, o)
	}
	return readJobs(path, stdin, o)
}

// isTaskDir reports whether dir holds a task (an instruction.md).
func isTaskDir(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, taskInstruction))
	return err == nil && fi.Mode().IsRegular()
}

// readTasks reads the task directory dir, or every task directory in it
// (sorted by name; directories without an instruction.md are skipped),
// as jobs. agent and attempts are the defaults of tasks that name none.
// Paths in a task.json resolve against its task directory and must lie
// under dir or an --allow-path, like a jobs file's.
func readTasks(dir string, o *BatchOptions) ([]batch.Job, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "task directory")
	}
	var dirs []string
	if isTaskDir(root) {
		dirs = []string{root}
	} else {
		entries, err := os.ReadDir(root)
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "read tasks")
		}
		for _, e := range entries {
			if p := filepath.Join(root, e.Name()); e.IsDir() && isTaskDir(p) {
				dirs = append(dirs, p)
			}
		}
		sort.Strings(dirs)
	}
	if len(dirs) == 0 {
		return nil, outposterr.New(outposterr.Configuration,
			"%s holds no task: a task directory has an %s (the prompt) and a %s; give a directory of them, or a jobs file", dir, taskInstruction, taskConfig)
	}
	trust, err := newJobTrust(root, "the tasks directory", o.AllowPaths, o.AllowEnv, o.Run.Credentials.Env)
	if err != nil {
		return nil, err
	}
	jobs := make([]batch.Job, 0, len(dirs))
	for _, d := range dirs {
		for _, f := range []string{taskInstruction, taskConfig} {
			if err := trust.checkFile(filepath.Join(d, f), "task "+d); err != nil {
				return nil, err
			}
		}
		j, err := readTask(d, o)
		if err != nil {
			return nil, err
		}
		trust.resolve(&j)
		if err := j.Compile(); err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "task %s", d)
		}
		if err := trust.check(&j, "task "+d); err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// readTask reads one task directory as a job with its paths absolute.
func readTask(dir string, o *BatchOptions) (batch.Job, error) {
	bad := func(format string, args ...any) error {
		return outposterr.New(outposterr.Configuration, "task %s: "+format, append([]any{dir}, args...)...)
	}
	var j batch.Job
	conf, err := readTaskFile(filepath.Join(dir, taskConfig))
	if err != nil {
		return j, bad("%v (a task needs a %s, {} at least)", err, taskConfig)
	}
	dec := json.NewDecoder(bytes.NewReader(conf))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return j, bad("%s: %v", taskConfig, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return j, bad("%s: text after its JSON object", taskConfig)
	}
	if j.Prompt != "" {
		return j, bad("%s gives a prompt: the prompt is %s", taskConfig, taskInstruction)
	}
	prompt, err := readTaskFile(filepath.Join(dir, taskInstruction))
	if err != nil {
		return j, bad("%v", err)
	}
	j.Prompt = string(prompt)
	if j.ID == "" {
		j.ID = filepath.Base(dir)
	}
	if j.Agent == "" {
		j.Agent = o.Run.Turn.Agent
	}
	if o.grading {
		gradingTask(&j)
	}
	if j.Agent == "" {
		return j, bad("no agent: name one in %s (\"agent\") or pass --agent", taskConfig)
	}
	if j.Attempts == 0 {
		j.Attempts = o.Attempts
	}
	if len(bytes.TrimSpace(j.Metadata)) == 0 {
		// Predictions name instances by metadata.instance_id.
		j.Metadata, _ = json.Marshal(map[string]string{"instance_id": j.ID})
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	switch {
	case j.Source != nil:
		s := j.Source.Resolve(dir)
		j.Source = &s
	case j.Workspace != "":
		j.Workspace = abs(j.Workspace)
	default:
		if isDir(filepath.Join(dir, taskWorkspace, ".git")) {
			j.Source = &source.Spec{Repo: filepath.Join(dir, taskWorkspace), Commit: "HEAD"}
		}
	}
	if e := j.Environment; e != nil {
		j.Environment = &batch.EnvironmentSpec{Dockerfile: abs(e.Dockerfile), Context: abs(e.Context)}
	} else if j.Image == "" && isFile(filepath.Join(dir, taskEnvironment, "Dockerfile")) {
		j.Environment = &batch.EnvironmentSpec{Context: filepath.Join(dir, taskEnvironment)}
	}
	tests := filepath.Join(dir, taskTests)
	if isDir(tests) {
		v := batch.VerifySpec{}
		if j.Verify != nil {
			v = *j.Verify
		}
		v.Files = abs(v.Files)
		if v.Files == "" {
			v.Files = tests
		}
		if v.Command == "" && isFile(filepath.Join(tests, taskTestScript)) {
			v.Command = "sh " + taskTestScript
		}
		if v.Command == "" {
			return j, bad("%s has no %s: add one, or give the verifier's command in %s (\"verify\": {\"command\"})",
				tests, taskTestScript, taskConfig)
		}
		j.Verify = &v
	} else if j.Verify != nil {
		v := *j.Verify
		v.Files = abs(v.Files)
		j.Verify = &v
	}
	if j.Verify != nil && j.Source == nil {
		return j, bad("its tests grade a patch of the task's source: make %s a git repository, or give a \"source\" ({\"repo\",\"commit\"}) in %s",
			filepath.Join(dir, taskWorkspace), taskConfig)
	}
	return j, nil
}

// readTaskFile reads a task's file, bounded.
func readTaskFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errors.New("no " + filepath.Base(path))
		}
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxTaskFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxTaskFile {
		return nil, errors.New(filepath.Base(path) + " is over 4 MiB")
	}
	if strings.TrimSpace(string(b)) == "" && filepath.Base(path) == taskInstruction {
		return nil, errors.New(taskInstruction + " is empty")
	}
	return b, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
