package cli

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/atomicfile"
	"github.com/outpost-dev/outpost/outposterr"
)

// maxTaskLines bounds the per-task score lines printed; the scores file
// holds every task.
const maxTaskLines = 50

// scoresPath is where a batch's scores go: beside its results.
func scoresPath(results string) string { return results + ".scores.json" }

// reportScores prints the verdicts of the whole results file when any job
// has a verifier — solved first, pass@1 and pass@k over the tasks, the
// mean reward — with a line per task of several attempts, and writes the
// scores (batch.Scores) to RESULTS.scores.json. Verdicts do not change the
// exit code.
func reportScores(w io.Writer, resultsPath string, jobs []batch.Job, all results) error {
	graded := false
	grades := make([]batch.Graded, 0, len(jobs))
	for _, j := range jobs {
		if j.Verify != nil {
			graded = true
		}
		task := j.Task
		if task == "" {
			task = j.ID
		}
		g := batch.Graded{Task: task}
		if last, ok := all.latest[j.ID]; ok {
			g.Verdict, g.Reward = last.Verdict, last.Reward
		}
		grades = append(grades, g)
	}
	if !graded {
		return nil
	}
	s := batch.Score(grades)
	b, _ := json.MarshalIndent(s, "", "  ")
	if err := atomicfile.Write(scoresPath(resultsPath), append(b, '\n'), 0o644); err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "write scores")
	}
	n := s.Passed + s.Failed + s.Errors
	fmt.Fprintf(w, "solved %d of %d graded jobs (%d failed, %d verifier errors", s.Passed, n, s.Failed, s.Errors)
	if s.NotGraded > 0 {
		fmt.Fprintf(w, "; %d not graded", s.NotGraded)
	}
	fmt.Fprintf(w, "); pass@1 %.3f", s.PassAt1)
	if s.K > 1 {
		fmt.Fprintf(w, ", pass@%d %.3f", s.K, s.PassAtK)
	}
	fmt.Fprintf(w, " over %d tasks", len(s.Tasks))
	if s.MeanReward != nil {
		fmt.Fprintf(w, "; mean reward %s", s.RewardStats)
	}
	fmt.Fprintf(w, "; scores in %s\n", scoresPath(resultsPath))
	lines := 0
	for _, t := range s.Tasks {
		if t.N+t.Errors < 2 {
			continue
		}
		if lines++; lines > maxTaskLines {
			fmt.Fprintf(w, "  … more tasks in %s\n", scoresPath(resultsPath))
			break
		}
		fmt.Fprintf(w, "  task %s: %d of %d passed", t.Task, t.C, t.N)
		if t.Errors > 0 {
			fmt.Fprintf(w, " (%d verifier errors)", t.Errors)
		}
		if t.N > 0 {
			fmt.Fprintf(w, ", pass@1 %.3f, pass@%d %.3f", t.PassAt1, t.N, t.PassAtN)
		}
		if t.MeanReward != nil {
			fmt.Fprintf(w, ", reward %s", t.RewardStats)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// maxPredictionPatch bounds a patch read back into a predictions file.
const maxPredictionPatch = 64 << 20

// Policies of --predictions-pick.
const (
	pickPassed = "passed"
	pickPatch  = "patch"
	pickFirst  = "first"
)

// prediction is one line of a SWE-bench predictions file; Job, Trial and
// Verdict are written to the file of every attempt only.
type prediction struct {
	InstanceID      string          `json:"instance_id"`
	ModelNameOrPath string          `json:"model_name_or_path"`
	ModelPatch      string          `json:"model_patch"`
	Job             string          `json:"job,omitempty"`
	Trial           int             `json:"trial,omitempty"`
	Verdict         harness.Verdict `json:"verdict,omitempty"`
}

// allPredictionsPath is the file of every attempt's prediction:
// preds.jsonl → preds.all.jsonl.
func allPredictionsPath(path string) string {
	return strings.TrimSuffix(path, ".jsonl") + ".all.jsonl"
}

// writePredictions writes the predictions of jobs whose metadata has an
// instance_id, from their latest result lines: one line per instance in
// path, the attempt chosen by pick (see --predictions-pick), and, when an
// instance has several attempts, every attempt's in allPredictionsPath.
// "{trial}" in path instead writes one file per trial number (every
// attempt's, as before).
func writePredictions(w io.Writer, path, pick, resultsPath string, jobs []batch.Job, all results) error {
	var preds []prediction
	for _, j := range jobs {
		var meta struct {
			InstanceID      any `json:"instance_id"`
			ModelNameOrPath any `json:"model_name_or_path"`
		}
		last, ok := all.latest[j.ID]
		if !ok {
			continue
		}
		md := j.Metadata
		if md == nil && j.Load != nil {
			md = last.Metadata // the job's, copied into its result line
		}
		if len(md) == 0 || json.Unmarshal(md, &meta) != nil {
			continue
		}
		id, ok := meta.InstanceID.(string)
		if !ok || id == "" {
			continue
		}
		p := prediction{InstanceID: id, Job: j.ID, Trial: j.Trial, Verdict: last.Verdict}
		if name, ok := meta.ModelNameOrPath.(string); ok && name != "" {
			p.ModelNameOrPath = name
		} else {
			p.ModelNameOrPath = "outpost-" + last.Agent
			if m := cmp.Or(last.Outcome.Model, j.Model); m != "" {
				p.ModelNameOrPath += "-" + m
			}
		}
		if last.Patch != nil && last.Patch.Path != "" {
			b, err := readPatch(filepath.Join(filepath.Dir(resultsPath), filepath.FromSlash(last.Patch.Path)))
			if err != nil {
				return outposterr.Wrap(outposterr.Configuration, err, "predictions: job %s", j.ID)
			}
			p.ModelPatch = string(b)
		}
		preds = append(preds, p)
	}
	if strings.Contains(path, "{trial}") {
		byFile := map[string][]prediction{}
		var order []string
		for _, p := range preds {
			file := strings.ReplaceAll(path, "{trial}", strconv.Itoa(max(p.Trial, 1)))
			if _, ok := byFile[file]; !ok {
				order = append(order, file)
			}
			byFile[file] = append(byFile[file], p)
		}
		n := 0
		for _, file := range order {
			if err := writePredictionFile(file, byFile[file], false); err != nil {
				return err
			}
			n += len(byFile[file])
		}
		fmt.Fprintf(w, "wrote %d predictions to %s\n", n, path)
		return nil
	}
	byID := map[string][]prediction{}
	var ids []string
	several := false
	for _, p := range preds {
		if _, ok := byID[p.InstanceID]; !ok {
			ids = append(ids, p.InstanceID)
		}
		byID[p.InstanceID] = append(byID[p.InstanceID], p)
		several = several || len(byID[p.InstanceID]) > 1
	}
	chosen := make([]prediction, 0, len(ids))
	for _, id := range ids {
		chosen = append(chosen, pickPrediction(byID[id], pick))
	}
	if err := writePredictionFile(path, chosen, false); err != nil {
		return err
	}
	if !several {
		fmt.Fprintf(w, "wrote %d predictions to %s\n", len(chosen), path)
		return nil
	}
	allPath := allPredictionsPath(path)
	if err := writePredictionFile(allPath, preds, true); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %d predictions to %s (one per instance, --predictions-pick %s); all %d attempts to %s\n",
		len(chosen), path, pick, len(preds), allPath)
	return nil
}

// pickPrediction chooses an instance's prediction among its attempts (in
// job order).
func pickPrediction(attempts []prediction, pick string) prediction {
	if pick == pickPassed {
		for _, p := range attempts {
			if p.Verdict == harness.VerdictPass {
				return p
			}
		}
	}
	if pick != pickFirst {
		for _, p := range attempts {
			if p.ModelPatch != "" {
				return p
			}
		}
	}
	return attempts[0]
}

// writePredictionFile writes preds as JSON lines; the attempt fields (job,
// trial, verdict) only when attempts is set.
func writePredictionFile(file string, preds []prediction, attempts bool) error {
	var b bytes.Buffer
	for _, p := range preds {
		if !attempts {
			p.Job, p.Trial, p.Verdict = "", 0, ""
		}
		line, _ := json.Marshal(p)
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := atomicfile.Write(file, b.Bytes(), 0o644); err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "write predictions")
	}
	return nil
}
