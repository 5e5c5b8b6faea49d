package outposttest_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/outpost-dev/outpost/outposttest"
)

// A rate-limited answer selected by a directive in the prompt, while the
// server's default scenario stays ok.
func ExampleDirective() {
	srv, err := outposttest.NewServer()
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	prompt := "hello " + outposttest.Directive(outposttest.ScenarioRateLimit)
	body := `{"model":"claude-opus-5-5","max_tokens":64,"stream":true,"tools":[{"name":"Bash"}],` +
		`"messages":[{"role":"user","content":"` + prompt + `"}]}`
	resp, err := http.Post(srv.URL()+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	_ = resp.Body.Close()
	fmt.Println(prompt)
	fmt.Println(resp.StatusCode, resp.Header.Get("retry-after"))
	fmt.Println(srv.Requests()[0].Scenario)
	// Output:
	// hello [[outpost:scenario=rate_limit]]
	// 429 1
	// rate_limit
}

// Pointing Claude Code at the server: add a fresh HOME (and IS_SANDBOX=1 when
// running as root with --dangerously-skip-permissions).
func ExampleClaudeEnv() {
	srv, err := outposttest.NewServer(outposttest.WithScenario(outposttest.ScenarioTool))
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	env := outposttest.ClaudeEnv(srv)
	fmt.Println(env["ANTHROPIC_BASE_URL"] == srv.URL(), env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"])
	name, content := outposttest.ToolFile("MARK-abc123")
	fmt.Println(name, content)
	fmt.Println(outposttest.ToolCommand("MARK-abc123"))
	// Output:
	// true 1
	// outpost-MARK-abc123.txt MARK-abc123
	// printf '%s' 'MARK-abc123' > 'outpost-MARK-abc123.txt'
}
