package credentials

import (
	"reflect"
	"strings"
	"testing"
)

func TestHTTPHeaders(t *testing.T) {
	s := MCPServer{Name: "docs", URL: "https://docs.invalid/mcp", Headers: map[string]string{"X-Team": "a"}, BearerTokenVar: "DOCS_TOKEN"}
	want := map[string]string{"X-Team": "a", "Authorization": "Bearer ${DOCS_TOKEN}"}
	if got := s.HTTPHeaders(); !reflect.DeepEqual(got, want) {
		t.Fatalf("HTTPHeaders() = %v, want %v", got, want)
	}
	if s.Headers["Authorization"] != "" {
		t.Fatal("the declaration's own map was changed")
	}
	if got := (MCPServer{Name: "plain", URL: "https://x.invalid"}).HTTPHeaders(); got != nil {
		t.Fatalf("no headers: %v", got)
	}
}

// TestMCPEnvReserved: an MCP server's env follows the reserved list of
// the CLI's own environment; other names pass.
func TestMCPEnvReserved(t *testing.T) {
	for _, name := range []string{"PATH", "LD_PRELOAD", "HOME", "XDG_CONFIG_HOME", "OUTPOST_X"} {
		err := MCPServer{Name: "fs", Command: "srv", Env: map[string]string{name: "x"}}.Validate()
		if err == nil || !strings.Contains(err.Error(), "env "+name+" is reserved") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := (MCPServer{Name: "fs", Command: "srv", Env: map[string]string{"MODE": "ro"}}).Validate(); err != nil {
		t.Errorf("MODE: %v", err)
	}
	reloc := MCPServer{Name: "fs", Command: "srv", Env: map[string]string{"CODEX_HOME": "x"}}
	if err := reloc.Validate("CODEX_HOME"); err == nil || !strings.Contains(err.Error(), "env CODEX_HOME is reserved") {
		t.Errorf("a CLI's relocation variable: %v", err)
	}
}

func TestMCPConfigEntry(t *testing.T) {
	for _, tc := range []struct {
		s    MCPServer
		typ  string
		want map[string]any
	}{
		{MCPServer{Name: "fs", Command: "npx", Args: []string{"-y", "fs"}, Env: map[string]string{"K": "${K}"}}, "stdio",
			map[string]any{"type": "stdio", "command": "npx", "args": []string{"-y", "fs"}, "env": map[string]string{"K": "${K}"}}},
		{MCPServer{Name: "x", Command: "x"}, "local", map[string]any{"type": "local", "command": "x", "args": []string{}}},
		{MCPServer{Name: "web", URL: "https://127.0.0.1/mcp", BearerTokenVar: "TOKEN"}, "stdio",
			map[string]any{"type": "http", "url": "https://127.0.0.1/mcp", "headers": map[string]string{"Authorization": "Bearer ${TOKEN}"}}},
	} {
		if got := tc.s.ConfigEntry(tc.typ); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ConfigEntry(%q) = %v, want %v", tc.s.Name, tc.typ, got, tc.want)
		}
	}
}
