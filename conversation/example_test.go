package conversation_test

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/outpost-dev/outpost/conversation"
)

// Example stores a conversation sealed with a key and reads it back: what
// a turn's capture and a later turn's restore do with a CLI's session files.
func Example() {
	dir, _ := os.MkdirTemp("", "store")
	defer os.RemoveAll(dir)
	key := bytes.Repeat([]byte{7}, 32)
	store, err := conversation.NewFileStore(dir, key)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	archive, _ := conversation.WriteFiles([]conversation.File{
		{Path: ".claude/projects/-workspace/c1.jsonl", Mode: 0o600, Content: []byte(`{"type":"user"}` + "\n")},
	})
	m, err := store.Save(ctx, conversation.Manifest{ID: "c1", Agent: "claude", Cwd: "/workspace"}, bytes.NewReader(archive))
	if err != nil {
		panic(err)
	}
	fmt.Println(m.ID, m.Encrypted, len(m.SHA256))

	_, rc, err := store.Load(ctx, "c1")
	if err != nil {
		panic(err)
	}
	defer rc.Close()
	files, _ := conversation.ReadFiles(rc)
	fmt.Println(files[0].Path)
	// Output:
	// c1 true 64
	// .claude/projects/-workspace/c1.jsonl
}
