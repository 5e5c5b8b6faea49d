package sandbox

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRedactedMasksEnvValuesInArgv(t *testing.T) {
	c := Command{Args: []string{"cli", "--token=MARK-secret-value", "--mode", "UTC"},
		Env: map[string]string{"TOKEN": "MARK-secret-value", "TZ": "UTC"}, Stdin: []byte("prompt")}
	r := c.Redacted()
	assert.NotContains(t, r, "MARK-secret-value")
	assert.Contains(t, r, `"--token=…"`)
	assert.Contains(t, r, `"UTC"`, "short values are not masked")
	assert.Contains(t, r, "env=[TOKEN TZ]")
	assert.Equal(t, "--token=MARK-secret-value", c.Args[1], "the command itself is untouched")
}

func TestCommandValidateRefusesNULInEnv(t *testing.T) {
	err := Command{Args: []string{"true"}, Env: map[string]string{"A": "x\x00y"}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("Validate = %v, want a NUL refusal", err)
	}
	if err := (Command{Args: []string{"true"}, Env: map[string]string{"A": "xy"}}).Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
}
