package credentials

import (
	"reflect"
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
