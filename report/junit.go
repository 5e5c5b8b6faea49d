package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// The JUnit XML shapes (the de facto schema Jenkins, GitLab and GitHub
// test reporters read: testsuites > testsuite > testcase > failure|skipped).
type (
	// junitCounts are the attributes testsuites and testsuite share.
	junitCounts struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Time     string `xml:"time,attr"`
	}
	junitSuites struct {
		XMLName xml.Name `xml:"testsuites"`
		junitCounts
		Suites []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		junitCounts
		Timestamp  string          `xml:"timestamp,attr,omitempty"`
		Hostname   string          `xml:"hostname,attr,omitempty"`
		Properties []junitProperty `xml:"properties>property,omitempty"`
		Cases      []junitCase     `xml:"testcase"`
	}
	junitProperty struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	junitCase struct {
		Name       string          `xml:"name,attr"`
		Classname  string          `xml:"classname,attr"`
		Time       string          `xml:"time,attr"`
		Properties []junitProperty `xml:"properties>property,omitempty"`
		Failure    *junitFailure   `xml:"failure,omitempty"`
		Error      *junitFailure   `xml:"error,omitempty"`
		Skipped    *junitSkipped   `xml:"skipped,omitempty"`
		SystemOut  string          `xml:"system-out,omitempty"`
	}
	junitFailure struct {
		Type    string `xml:"type,attr"`
		Message string `xml:"message,attr"`
		Body    string `xml:",chardata"`
	}
	junitSkipped struct {
		Message string `xml:"message,attr"`
	}
)

func seconds(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }

// xmlSafe drops characters XML 1.0 cannot carry (most control characters),
// which encoding/xml would otherwise turn into U+FFFD silently, and the DEL
// and C1 controls XML 1.0 discourages (U+009B and U+009D are the 8-bit CSI
// and OSC of a terminal the XML is printed to), and bounds s.
func xmlSafe(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20, r >= 0x7f && r <= 0x9f, r == 0xFFFE, r == 0xFFFF, r >= 0xD800 && r <= 0xDFFF:
			return '\uFFFD'
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// JUnit writes one testsuite with one testcase per job, graded by its
// verdict: fail is a <failure> (the verifier's error and output tail), a
// verifier error an <error>; a job without a verifier is not graded — no
// <failure> — unless its run failed, which is an <error> of its class (a
// run that failed was no test); an unfinished job is <skipped>. Every
// testcase carries its verdict, reward, task, trial and run outcome as
// properties; the suite leads its properties with the headline (solved
// first) and pass@1.
func (r *Report) JUnit(w io.Writer) error {
	t := r.Totals
	suite := junitSuite{junitCounts: junitCounts{Name: "outpost", Tests: t.Jobs, Skipped: t.Unfinished, Time: seconds(t.DurationMS)}}
	suite.Properties = append(suite.Properties, junitProperty{"summary", xmlSafe(r.Headline(), 2000)},
		junitProperty{"solved", fmt.Sprint(t.Solved)}, junitProperty{"graded", fmt.Sprint(t.Graded)},
		junitProperty{"not_graded", fmt.Sprint(t.NotGraded)})
	if t.Graded > 0 {
		suite.Properties = append(suite.Properties, junitProperty{"pass_at_1", fmt.Sprintf("%.4f", r.Scores.PassAt1)})
		if r.Scores.K > 1 {
			suite.Properties = append(suite.Properties, junitProperty{fmt.Sprintf("pass_at_%d", r.Scores.K), fmt.Sprintf("%.4f", r.Scores.PassAtK)})
		}
		if m := r.Scores.MeanReward; m != nil {
			suite.Properties = append(suite.Properties, junitProperty{"mean_reward", fmt.Sprintf("%.4f", *m)})
		}
	}
	if m := r.Manifest; m != nil {
		if !m.Started.IsZero() {
			suite.Timestamp = m.Started.UTC().Format(time.RFC3339)
		}
		suite.Hostname = xmlSafe(m.Host.Name, 200)
		suite.Properties = append(suite.Properties, junitProperty{"outpost_version", xmlSafe(m.OutpostVersion, 200)})
		for _, a := range sortedKeys(m.CLIVersions) {
			suite.Properties = append(suite.Properties, junitProperty{a + "_version", xmlSafe(m.CLIVersions[a], 200)})
		}
		if m.ImageDigest != "" {
			suite.Properties = append(suite.Properties, junitProperty{"image_digest", xmlSafe(m.ImageDigest, 200)})
		}
	}
	suite.Properties = append(suite.Properties, junitProperty{"cost_usd", xmlSafe(t.totalCost(), 100)},
		junitProperty{"tokens", fmt.Sprint(t.Tokens)})
	for i := range r.Jobs {
		j := &r.Jobs[i]
		c := junitCase{Name: xmlSafe(j.ID, 1000), Classname: xmlSafe("outpost."+agentsOf(j), 200), Time: seconds(j.DurationMS)}
		g := j.Grade()
		c.Properties = []junitProperty{{"verdict", g}, {"outcome", xmlSafe(j.Status(), 100)}}
		if j.Reward != nil {
			c.Properties = append(c.Properties, junitProperty{"reward", fmt.Sprint(*j.Reward)})
		}
		if j.Task != "" && j.Task != j.ID {
			c.Properties = append(c.Properties, junitProperty{"task", xmlSafe(j.Task, 1000)})
		}
		if j.Trial > 0 {
			c.Properties = append(c.Properties, junitProperty{"trial", fmt.Sprint(j.Trial)})
		}
		o := j.Outcome
		runBody := func() string {
			body := fmt.Sprintf("agent: %s\nturns: %d, retries: %d, parks: %d\n", agentsOf(j), j.Turns, j.Retries, j.Parks)
			if o.Conversation != "" {
				body += "conversation: " + o.Conversation + "\n"
			}
			if o.ResetAt != "" {
				body += "reset_at: " + o.ResetAt + "\n"
			}
			if o.Error != "" {
				body += "\n" + o.Error + "\n"
			}
			return body
		}
		verifyText := func() (msg, body string) {
			v := j.Verify
			if v == nil {
				return "", ""
			}
			if v.ExitCode != nil {
				body = fmt.Sprintf("verifier exit code: %d\n", *v.ExitCode)
			}
			if v.Error != "" {
				body += v.Error + "\n"
				msg = v.Error
			}
			if v.Output != "" {
				body += "\nverifier output (tail):\n" + v.Output
			}
			return msg, body
		}
		switch {
		case g == GradeUnfinished:
			c.Skipped = &junitSkipped{Message: "the run stopped before this job finished"}
		case g == GradeFail:
			msg, body := verifyText()
			if msg == "" {
				msg = "the verifier failed it"
			}
			suite.Failures++
			c.Failure = &junitFailure{Type: "verdict", Message: xmlSafe("fail: "+msg, 2000), Body: xmlSafe(body+"\n"+runBody(), 64<<10)}
		case g == GradeError:
			msg, body := verifyText()
			suite.Errors++
			c.Error = &junitFailure{Type: "verifier", Message: xmlSafe("verifier error: "+msg, 2000), Body: xmlSafe(body+"\n"+runBody(), 64<<10)}
		case g == GradeNotGraded && !o.OK:
			suite.Errors++
			c.Error = &junitFailure{Type: xmlSafe(j.Status(), 100), Message: xmlSafe(j.Detail()+": "+strings.TrimPrefix(o.Error, o.Class+": "), 2000),
				Body: xmlSafe(runBody(), 64<<10)}
		default:
			c.SystemOut = xmlSafe(o.Text, 64<<10)
		}
		suite.Cases = append(suite.Cases, c)
	}
	doc := junitSuites{junitCounts: suite.junitCounts, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
