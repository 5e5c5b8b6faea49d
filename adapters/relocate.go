package adapters

import (
	"bytes"
	"encoding/json"
)

// RelocateJSON rewrites, in captured JSON or JSON lines, every field named
// by keys whose value is the string oldCwd so that it holds newCwd instead.
// Fields match as the CLIs write them: "key":"value", without spaces. It
// is the JSON part of most [Storage.Relocate] implementations.
func RelocateJSON(content []byte, oldCwd, newCwd string, keys ...string) []byte {
	oldJSON, _ := json.Marshal(oldCwd)
	newJSON, _ := json.Marshal(newCwd)
	for _, k := range keys {
		field := `"` + k + `":`
		content = bytes.ReplaceAll(content, []byte(field+string(oldJSON)), []byte(field+string(newJSON)))
	}
	return content
}
