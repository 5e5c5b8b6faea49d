package adapters

import (
	"bytes"
	"encoding/json"
)

// Plumbing the live sessions share: they speak JSON-RPC with their CLI
// over stdio, one JSON message a line.

// AppendJSONLine appends v to b as one newline-terminated line of JSON,
// without HTML escaping.
func AppendJSONLine(b []byte, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return append(b, buf.Bytes()...)
}

// Outbox holds what a live session has to write to stdin next, for its
// Pending method ([LiveSession]).
type Outbox struct{ pending []byte }

// Queue appends line (see [AppendJSONLine]) to what is pending.
func (o *Outbox) Queue(line []byte) { o.pending = append(o.pending, line...) }

// Pending returns, and forgets, the bytes to write to stdin now.
func (o *Outbox) Pending() []byte {
	p := o.pending
	o.pending = nil
	return p
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// MethodNotFound is the JSON-RPC error code a live session answers a CLI's
// request with when it does not serve the method.
const MethodNotFound = -32601

// Unsupported is the error a live session answers a CLI's request for
// method with: [MethodNotFound], since a headless turn has no one to ask.
func Unsupported(method string) *RPCError {
	return &RPCError{Code: MethodNotFound, Message: "outpost: " + method + " is not supported in a headless turn"}
}

// IsRequestID reports whether a JSON-RPC id is present (not absent, not null).
func IsRequestID(id json.RawMessage) bool { return len(id) > 0 && string(id) != "null" }
