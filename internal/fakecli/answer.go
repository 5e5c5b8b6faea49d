package fakecli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// AnswersEnv makes the fake a scripted model: the variable names a file of
// answers, one per line. Each run takes the first line as its final answer
// (and removes it), appends its prompt as one JSON string line to FILE.prompts,
// and prints a conversation event (the --resume id, else "answer-1"), the
// result and a successful finished event. No answer left: a failure.
const AnswersEnv = "FAKECLI_ANSWERS"

func serveAnswer(file string) {
	prompt, _ := readAll(os.Stdin)
	emit := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Println(string(b))
	}
	if f, err := os.OpenFile(file+".prompts", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		b, _ := json.Marshal(prompt)
		_, _ = f.Write(append(b, '\n'))
		_ = f.Close()
	}
	id := argAfter("--resume")
	if id == "" {
		id = "answer-1"
	}
	emit(map[string]any{"type": "conversation", "id": id})
	data, err := os.ReadFile(file)
	lines := strings.SplitN(string(data), "\n", 2)
	if err != nil || strings.TrimSpace(lines[0]) == "" {
		emit(map[string]any{"type": "failure", "text": "fake: no answer left"})
		emit(map[string]any{"type": "finished", "ok": false})
		os.Exit(1)
	}
	rest := ""
	if len(lines) == 2 {
		rest = lines[1]
	}
	_ = os.WriteFile(file, []byte(rest), 0o600)
	emit(map[string]any{"type": "result", "text": lines[0]})
	emit(map[string]any{"type": "finished", "ok": true})
	os.Exit(0)
}

// argAfter returns the argument after flag, or "".
func argAfter(flag string) string {
	for i, a := range os.Args[:len(os.Args)-1] {
		if a == flag {
			return os.Args[i+1]
		}
	}
	return ""
}
