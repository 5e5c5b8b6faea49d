// Package fakecli is a scriptable fake agent CLI and its adapter, for tests of
// the harness, the sandboxes and the outpost command without a real CLI.
//
// The fake CLI is the test binary itself: a test's TestMain calls [Main] when
// [IsChild] reports that the process was started as the fake. Its prompt
// (stdin) is a script, one command per line:
//
//	emit JSON          print JSON on stdout (one line)
//	stderr TEXT        print TEXT on stderr
//	sleep DURATION     sleep (Go duration)
//	spawn-sleep SECS   start a background `sleep SECS` that inherits stdout and stderr
//	trap-term          ignore SIGTERM from now on
//	hang               block forever
//	big BYTES          print one stdout line of BYTES bytes
//	env NAME           emit a text event "NAME=value" (or "NAME unset")
//	alloc MIB          allocate and touch MIB mebibytes, then keep them
//	cat-schema         emit a text event "schema: CONTENT" of the --schema file
//	ws-put PATH TEXT   write TEXT to PATH, relative to the working directory
//	ws-del PATH        remove PATH, relative to the working directory
//	exit CODE          exit with CODE (default 0 at the end of the script)
//	flood N BYTES      send N Anthropic messages requests of BYTES prompt bytes
//	                   each, one after another and whatever their answers, to
//	                   the input's endpoint with its key (a hostile agent
//	                   bypassing its CLI); a text event "flood: STATUS…" each
//	                   time and one "flood done" line at the end
//
// and, for [StorageAdapter], write, cat and hooks.
//
// With the argument --live the fake speaks a small live-input protocol
// instead (see [Adapter.LiveRequest]).
//
// The adapter decodes the JSON lines: {"type":"conversation","id":…},
// {"type":"text","text":…}, {"type":"result","text":…}, {"type":"failure","text":…,"status":N},
// {"type":"finished","ok":bool}, {"type":"usage","input":N,"output":N,"cost":F,"id":…,"scope":…},
// {"type":"quota","status":…,"reset":RFC3339}, {"type":"retry","attempt":N,"status":N},
// {"type":"tool","text":NAME}, {"type":"tool-result","text":…};
// a conversation line may carry "model".
// anything else becomes a raw event.
package fakecli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/usage"
)

// ChildEnv marks a process started as the fake CLI.
const ChildEnv = "FAKECLI_CHILD"

// IsChild reports whether this process runs as the fake CLI.
func IsChild() bool { return os.Getenv(ChildEnv) == "1" }

// hold keeps allocated memory reachable.
var hold [][]byte

// MCPEnv makes the fake a minimal MCP stdio server instead of a CLI: it
// offers one tool named "echo_" + $FAKECLI_MCP_SUFFIX.
const MCPEnv = "FAKECLI_MCP"

// MCPExpectEnv, when set, must equal $FAKECLI_MCP_SECRET
// ([MCPSecretEnv]), or the fake MCP server exits 3 before answering: its
// tool listed proves a test's env values reached it.
const (
	MCPExpectEnv = "FAKECLI_MCP_EXPECT"
	MCPSecretEnv = "FAKECLI_MCP_SECRET"
)

// BaseURLEnv and KeyEnv carry the input's endpoint (Input.Endpoint) to the
// fake, for its flood command.
const (
	BaseURLEnv = "FAKECLI_BASE_URL"
	KeyEnv     = "FAKECLI_KEY"
)

// flood runs the flood command "N BYTES".
func flood(arg string, say func(string)) {
	var n, size int
	if _, err := fmt.Sscan(arg, &n, &size); err != nil {
		say("flood: bad arguments: " + err.Error())
		return
	}
	prompt := strings.Repeat("x", size)
	body, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 64,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	client := &http.Client{Timeout: time.Minute}
	for i := 0; i < n; i++ {
		req, err := http.NewRequest(http.MethodPost, strings.TrimRight(os.Getenv(BaseURLEnv), "/")+"/v1/messages", bytes.NewReader(body))
		if err != nil {
			say("flood: " + err.Error())
			return
		}
		req.Header.Set("x-api-key", os.Getenv(KeyEnv))
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("content-type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			say("flood: " + err.Error())
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		say(fmt.Sprintf("flood: %d", resp.StatusCode))
	}
	say("flood done")
}

// Main runs the fake CLI and exits.
func Main() {
	if os.Getenv(MCPEnv) == "1" {
		serveMCP()
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[len(os.Args)-1] == LiveArg {
		serveLive()
	}
	if f := os.Getenv(AnswersEnv); f != "" {
		serveAnswer(f)
	}
	script, _ := readAll(os.Stdin)
	code := 0
	out := bufio.NewWriter(os.Stdout)
	flush := func() { _ = out.Flush() }
	for _, raw := range strings.Split(script, "\n") {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(raw), " ")
		switch cmd {
		case "":
		case "emit":
			fmt.Fprintln(out, arg)
			flush()
		case "stderr":
			fmt.Fprintln(os.Stderr, arg)
		case "sleep":
			d, _ := time.ParseDuration(arg)
			time.Sleep(d)
		case "spawn-sleep":
			c := exec.Command("sleep", arg)
			c.Stdout, c.Stderr = os.Stdout, os.Stderr
			_ = c.Start()
		case "trap-term":
			signal.Ignore(syscall.SIGTERM)
		case "hang":
			flush()
			select {}
		case "big":
			n, _ := strconv.Atoi(arg)
			b := make([]byte, n)
			for i := range b {
				b[i] = 'x'
			}
			_, _ = out.Write(b)
			_, _ = out.WriteString("\n")
			flush()
		case "env":
			text := arg + " unset"
			if v, ok := os.LookupEnv(arg); ok {
				text = arg + "=" + v
			}
			b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
			fmt.Fprintln(out, string(b))
			flush()
		case "alloc":
			n, _ := strconv.Atoi(arg)
			for i := 0; i < n; i++ {
				b := make([]byte, 1<<20)
				for j := 0; j < len(b); j += 4096 {
					b[j] = 1
				}
				hold = append(hold, b)
			}
		case "cat-schema":
			text := "no schema file"
			if b, err := os.ReadFile(argAfter("--schema")); err == nil {
				text = "schema: " + string(b)
			}
			b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
			fmt.Fprintln(out, string(b))
			flush()
		case "ws-put":
			p, text, _ := strings.Cut(arg, " ")
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "put:", err)
			}
		case "ws-del":
			if err := os.Remove(arg); err != nil {
				fmt.Fprintln(os.Stderr, "del:", err)
			}
		case "flood":
			flush()
			flood(arg, func(text string) {
				b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
				fmt.Fprintln(out, string(b))
				flush()
			})
		case "exit":
			code, _ = strconv.Atoi(arg)
			flush()
			os.Exit(code)
		default:
			if storageCommand(cmd, arg, func(text string) {
				b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
				fmt.Fprintln(out, string(b))
				flush()
			}) {
				continue
			}
			fmt.Fprintln(os.Stderr, "fakecli: unknown command", cmd)
			flush()
			os.Exit(99)
		}
	}
	flush()
	os.Exit(code)
}

func readAll(f *os.File) (string, error) {
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String(), nil
		}
	}
}

// Adapter is the fake CLI's adapter.
type Adapter struct {
	// Path is the fake binary (usually the test executable).
	Path string
	// Caps overrides the capabilities; zero value: resumable, requires finished, events usage.
	Caps *adapters.Capabilities
}

var _ adapters.Adapter = (*Adapter)(nil)

// New returns an adapter that runs path as the fake CLI.
func New(path string) *Adapter { return &Adapter{Path: path} }

// Name implements adapters.Adapter.
func (a *Adapter) Name() string { return "fake" }

// Binary implements adapters.Adapter.
func (a *Adapter) Binary() string { return a.Path }

// Capabilities implements adapters.Adapter.
func (a *Adapter) Capabilities() adapters.Capabilities {
	if a.Caps != nil {
		return *a.Caps
	}
	return adapters.Capabilities{Resumable: true, RequiresFinished: true, Usage: adapters.UsageEvents}
}

// Request implements adapters.Adapter: the prompt is the script.
func (a *Adapter) Request(in adapters.Input) (sandbox.Command, error) {
	if in.Prompt == "" {
		return sandbox.Command{}, outposterr.New(outposterr.Configuration, "fake: empty prompt")
	}
	// A race-enabled test binary otherwise sleeps a second at exit.
	env := map[string]string{ChildEnv: "1", "GORACE": "atexit_sleep_ms=0"}
	for k, v := range in.Env {
		env[k] = v
	}
	if ep := in.Endpoint; ep != nil {
		env[BaseURLEnv], env[KeyEnv] = ep.BaseURL, ep.APIKey+ep.OAuthToken
	}
	args := []string{a.Path}
	if in.Continue != "" {
		args = append(args, "--resume", in.Continue)
	}
	if len(in.Schema) > 0 && in.Scratch != "" {
		args = append(args, "--schema", path.Join(in.Scratch, "schema.json"))
	}
	return sandbox.Command{Args: args, Env: env, Dir: in.Workdir, Stdin: []byte(in.Prompt)}, nil
}

var _ adapters.TurnFiles = (*Adapter)(nil)

// TurnFiles implements adapters.TurnFiles: with Capabilities.StructuredOutput
// the schema is written to schema.json in the turn's scratch directory.
func (a *Adapter) TurnFiles(in adapters.Input) []adapters.TurnFile {
	if len(in.Schema) == 0 {
		return nil
	}
	return []adapters.TurnFile{{Name: "schema.json", Data: in.Schema}}
}

// NewDecoder implements adapters.Adapter.
func (a *Adapter) NewDecoder() adapters.Decoder { return decoder{} }

type decoder struct{}

type line struct {
	Type    string  `json:"type"`
	ID      string  `json:"id"`
	Text    string  `json:"text"`
	Status  any     `json:"status"`
	OK      bool    `json:"ok"`
	Input   int64   `json:"input"`
	Output  int64   `json:"output"`
	Cost    float64 `json:"cost"`
	Scope   string  `json:"scope"`
	Reset   string  `json:"reset"`
	Attempt int     `json:"attempt"`
	Model   string  `json:"model"`
}

func (decoder) Decode(b []byte) []adapters.Event {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return []adapters.Event{adapters.RawEvent(b)}
	}
	status, _ := l.Status.(float64)
	switch l.Type {
	case "conversation":
		return []adapters.Event{{Kind: adapters.KindConversation, Conversation: l.ID, Model: l.Model}}
	case "tool":
		return []adapters.Event{{Kind: adapters.KindTool, Tool: &adapters.ToolCall{Name: l.Text}}}
	case "tool-result":
		return []adapters.Event{{Kind: adapters.KindToolResult, ToolResult: &adapters.ToolResult{Preview: l.Text}}}
	case "text":
		return []adapters.Event{{Kind: adapters.KindText, Text: l.Text}}
	case "result":
		return []adapters.Event{{Kind: adapters.KindResult, Text: l.Text}}
	case "failure":
		return []adapters.Event{{Kind: adapters.KindFailure, Text: l.Text, Failure: &adapters.FailureDetail{Status: int(status)}}}
	case "finished":
		return []adapters.Event{{Kind: adapters.KindFinished, Finished: &adapters.FinishedDetail{OK: l.OK}}}
	case "usage":
		scope := usage.ScopeMessage
		if l.Scope != "" {
			scope = usage.Scope(l.Scope)
		}
		return []adapters.Event{{Kind: adapters.KindUsage, Usage: &usage.Report{Scope: scope, MessageID: l.ID,
			Usage: usage.Usage{Input: l.Input, Output: l.Output, CostUSD: l.Cost, CostKnown: l.Cost != 0}, HasCost: l.Cost != 0}}}
	case "quota":
		reset, _ := time.Parse(time.RFC3339, l.Reset)
		st, _ := l.Status.(string)
		return []adapters.Event{{Kind: adapters.KindQuota, Text: l.Text, Quota: &adapters.QuotaSignal{Status: st, ResetAt: reset}}}
	case "retry":
		return []adapters.Event{{Kind: adapters.KindRetry, Retry: &adapters.RetryNotice{Attempt: l.Attempt, Status: int(status)}}}
	}
	return []adapters.Event{adapters.RawEvent(b)}
}

var resetRe = regexp.MustCompile(`reset=(\S+)`)

// Quota implements adapters.Adapter: texts containing "quota" match;
// "reset=RFC3339" gives the reset, "reset=+DURATION" one relative to at.
func (a *Adapter) Quota(text string, at time.Time) (bool, time.Time) {
	if !strings.Contains(strings.ToLower(text), "quota") {
		return false, time.Time{}
	}
	m := resetRe.FindStringSubmatch(text)
	if m == nil {
		return true, time.Time{}
	}
	if d, err := time.ParseDuration(strings.TrimPrefix(m[1], "+")); err == nil && strings.HasPrefix(m[1], "+") {
		return true, at.Add(d)
	}
	t, _ := time.Parse(time.RFC3339, m[1])
	return true, t
}

// Unavailable implements adapters.Adapter.
func (a *Adapter) Unavailable(text string) (string, bool) {
	if strings.Contains(strings.ToLower(text), "overloaded") {
		return "overloaded", true
	}
	return "", false
}

// Auth implements adapters.Adapter.
func (a *Adapter) Auth(text string) (string, bool) {
	if strings.Contains(strings.ToLower(text), "unauthorized") {
		return "unauthorized", true
	}
	return "", false
}

// serveMCP answers MCP JSON-RPC requests on stdin until it closes.
func serveMCP() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	tool := "echo_" + os.Getenv("FAKECLI_MCP_SUFFIX")
	if want, ok := os.LookupEnv(MCPExpectEnv); ok && want != os.Getenv(MCPSecretEnv) {
		// The test's values did not arrive: fail to start, which fails a
		// turn that requires the server.
		fmt.Fprintln(os.Stderr, "fakecli: MCP server environment mismatch")
		os.Exit(3)
	}
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || len(req.ID) == 0 {
			continue // notifications need no answer
		}
		var result any
		switch req.Method {
		case "initialize":
			v := req.Params.ProtocolVersion
			if v == "" {
				v = "2025-06-18"
			}
			result = map[string]any{"protocolVersion": v, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "outpost-fake", "version": "1.0.0"}}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{"name": tool, "description": "Echo the input.",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}}}}
		case "tools/call":
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "echo"}}}
		default:
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			continue
		}
		_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}
}
