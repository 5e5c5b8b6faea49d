// Package typed checks that an agent's final answer is a JSON value matching
// a JSON Schema, and words the instruction and the repair prompt a turn needs
// to get one. It is pure: no disk, no network (a schema's $ref may point
// only inside the schema itself), no clock.
//
// The harness uses it for typed responses (harness.Turn.Schema): a CLI with
// native structured output (Codex --output-schema, Claude Code
// --json-schema) is given the schema
// directly, the others get [Instruction] after the prompt; the answer is
// checked with [Schema.Check], and a failed check gets one repair turn on
// the same conversation with [Schema.RepairPrompt].
package typed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/outpost-dev/outpost/adapters"
)

// printer words validation errors in English.
var printer = message.NewPrinter(language.English)

// MaxSchemaBytes bounds a schema (it travels in prompts and files).
const MaxSchemaBytes = 64 << 10

// maxReason bounds the validation text a repair prompt quotes.
const maxReason = 600

// resourceURL names the schema inside its compiler.
const resourceURL = "outpost:///schema.json"

// Schema is a compiled JSON Schema.
type Schema struct {
	raw    json.RawMessage // compact form
	schema *jsonschema.Schema
}

// noLoader refuses every external reference.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema reference %s is not allowed (references must stay inside the schema)", url)
}

// Compile parses and compiles schema (draft 2020-12 unless "$schema" names
// another draft). The schema must be a JSON object.
func Compile(schema []byte) (*Schema, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, fmt.Errorf("schema is %d bytes, over the %d-byte limit", len(schema), MaxSchemaBytes)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, schema); err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	if !bytes.HasPrefix(compact.Bytes(), []byte("{")) {
		return nil, errors.New("schema must be a JSON object")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(compact.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(resourceURL, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile(resourceURL)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %s", oneLine(err.Error()))
	}
	return &Schema{raw: compact.Bytes(), schema: s}, nil
}

// JSON returns the schema, compacted.
func (s *Schema) JSON() json.RawMessage { return append(json.RawMessage(nil), s.raw...) }

// Check extracts the JSON value from an answer — the whole text, or the one
// fenced code block it consists of — and validates it. It returns the value,
// compacted, or an error saying what failed (not JSON, or which part of it
// does not match).
func (s *Schema) Check(answer string) (json.RawMessage, error) {
	text := unfence(strings.TrimSpace(answer))
	if text == "" {
		return nil, errors.New("the answer is empty")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(text)); err != nil {
		return nil, fmt.Errorf("the answer is not a JSON value: %s", oneLine(err.Error()))
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(compact.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("the answer is not a JSON value: %s", oneLine(err.Error()))
	}
	// A repeated key is validated as its last value only, while a reader of
	// the returned value may take the first: refuse the ambiguity.
	if err := duplicateKey(compact.Bytes()); err != nil {
		return nil, err
	}
	if err := s.schema.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the answer does not match the schema: %s", describe(ve))
		}
		return nil, fmt.Errorf("the answer does not match the schema: %s", oneLine(err.Error()))
	}
	return compact.Bytes(), nil
}

// Instruction is the text appended to a prompt for a CLI without native
// structured output.
func (s *Schema) Instruction() string {
	return "\n\nReply with only one JSON value that matches this JSON Schema: no prose before or after it, no code fence.\nJSON Schema: " + string(s.raw)
}

// RepairPrompt is the prompt of the one repair turn after an answer failed
// Check with reason.
func (s *Schema) RepairPrompt(reason error) string {
	return "Your previous answer cannot be used: " + bound(reason.Error(), maxReason) +
		"\nReply again with only one JSON value that matches this JSON Schema: no prose, no code fence.\nJSON Schema: " + string(s.raw)
}

// unfence returns the body of a text that is exactly one fenced code block
// (```json … ```), else the text.
func unfence(text string) string {
	if !strings.HasPrefix(text, "```") || !strings.HasSuffix(text, "```") || len(text) < 6 {
		return text
	}
	body := text[3 : len(text)-3]
	nl := strings.IndexByte(body, '\n')
	if nl < 0 {
		return text
	}
	if lang := strings.TrimSpace(body[:nl]); lang != "" && lang != "json" && lang != "JSON" {
		return text
	}
	body = body[nl+1:]
	if strings.Contains(body, "```") {
		return text
	}
	return strings.TrimSpace(body)
}

// duplicateKey reports an object in the JSON value b (valid, compact) that
// names one key twice (after unescaping: "a" and "\u0061" are one key).
func duplicateKey(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		keys     map[string]struct{} // nil for an array
		wantsKey bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the answer is not a JSON value: %s", oneLine(err.Error()))
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil && stack[n-1].wantsKey {
			if k, ok := tok.(string); ok {
				if _, dup := stack[n-1].keys[k]; dup {
					return fmt.Errorf("the answer is not a usable JSON value: an object repeats the key %s", bound(strconv.Quote(k), 100))
				}
				stack[n-1].keys[k] = struct{}{}
				stack[n-1].wantsKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{keys: map[string]struct{}{}, wantsKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: its object wants the next key.
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].wantsKey = true
		}
	}
}

// describe flattens a validation error into "at /path: message" items, the
// deepest causes first, bounded.
func describe(ve *jsonschema.ValidationError) string {
	var items []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			items = append(items, "at "+loc+": "+oneLine(e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(items) > 5 {
		items = append(items[:5], fmt.Sprintf("and %d more", len(items)-5))
	}
	return bound(strings.Join(items, "; "), maxReason)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// bound cuts s to at most n bytes on a rune boundary, marking the cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return adapters.Preview(s, n) + "…"
}
