package typed

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const verdictSchema = `{
  "type": "object",
  "properties": {
    "verdict": {"type": "string", "enum": ["pass", "fail"]},
    "score": {"type": "integer", "minimum": 0, "maximum": 10}
  },
  "required": ["verdict", "score"],
  "additionalProperties": false
}`

func TestCheck(t *testing.T) {
	s, err := Compile([]byte(verdictSchema))
	require.NoError(t, err)
	for _, tc := range []struct {
		name, answer, want, errPart string
	}{
		{name: "plain", answer: `{"verdict":"pass","score":7}`, want: `{"verdict":"pass","score":7}`},
		{name: "spaces compacted", answer: "  {\n \"verdict\": \"fail\", \"score\": 0 }\n", want: `{"verdict":"fail","score":0}`},
		{name: "fenced", answer: "```json\n{\"verdict\":\"pass\",\"score\":1}\n```", want: `{"verdict":"pass","score":1}`},
		{name: "bare fence", answer: "```\n{\"verdict\":\"pass\",\"score\":1}\n```", want: `{"verdict":"pass","score":1}`},
		{name: "prose", answer: `Sure! {"verdict":"pass","score":7}`, errPart: "not a JSON value"},
		{name: "empty", answer: " \n", errPart: "empty"},
		{name: "wrong enum", answer: `{"verdict":"maybe","score":7}`, errPart: "at /verdict"},
		{name: "missing", answer: `{"verdict":"pass"}`, errPart: "score"},
		{name: "extra", answer: `{"verdict":"pass","score":3,"why":"x"}`, errPart: "why"},
		{name: "range", answer: `{"verdict":"pass","score":11}`, errPart: "at /score"},
		{name: "two values", answer: `{"verdict":"pass","score":1} {}`, errPart: "not a JSON value"},
		{name: "other fence", answer: "```python\n{\"verdict\":\"pass\",\"score\":1}\n```", errPart: "not a JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Check(tc.answer)
			if tc.errPart != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errPart)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(got))
			assert.Equal(t, tc.want, string(got), "compacted")
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	for name, schema := range map[string]string{
		"not json":     `{"type":`,
		"not object":   `["type"]`,
		"bad keyword":  `{"type":"strin"}`,
		"external ref": `{"$ref":"https://example.invalid/s.json"}`,
		"file ref":     `{"$ref":"file:///etc/passwd"}`,
		"too big":      `{"description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`,
	} {
		_, err := Compile([]byte(schema))
		assert.Error(t, err, name)
	}
	// A reference inside the schema is fine.
	s, err := Compile([]byte(`{"$defs":{"n":{"type":"integer"}},"type":"array","items":{"$ref":"#/$defs/n"}}`))
	require.NoError(t, err)
	_, err = s.Check(`[1,2,"x"]`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at /2")
}

func TestPrompts(t *testing.T) {
	s, err := Compile([]byte(verdictSchema))
	require.NoError(t, err)
	assert.Contains(t, s.Instruction(), `"required":["verdict","score"]`, "the compact schema is quoted")
	p := s.RepairPrompt(errors.New("the answer does not match the schema: at /score: " + strings.Repeat("y", 2000)))
	assert.Contains(t, p, "Your previous answer cannot be used: the answer does not match the schema: at /score")
	assert.Less(t, len(p), 1200, "the quoted reason is bounded")
	assert.Contains(t, p, string(s.JSON()))
}

func FuzzCheck(f *testing.F) {
	s, err := Compile([]byte(verdictSchema))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(`{"verdict":"pass","score":7}`)
	f.Add("```json\n{}\n```")
	f.Add("```")
	f.Fuzz(func(t *testing.T, answer string) {
		v, err := s.Check(answer)
		if err == nil {
			if _, again := s.Check(string(v)); again != nil {
				t.Fatalf("an accepted value %s fails when checked again: %v", v, again)
			}
		}
	})
}
