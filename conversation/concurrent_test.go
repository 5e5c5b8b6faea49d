package conversation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConcurrentSavesOfOneID: two turns (two processes, two stores over one
// directory) saving the same conversation at once — a fork and a resume
// racing — leave one of the two versions whole: the manifest always
// describes the archive beside it, so the conversation still loads.
func TestConcurrentSavesOfOneID(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	stores := make([]*FileStore, 2)
	for i := range stores {
		s, err := NewFileStore(dir, nil)
		require.NoError(t, err)
		stores[i] = s
	}
	for round := range 200 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, s := range stores {
			content := []byte(fmt.Sprintf("round %d by %d %s", round, i, bytes.Repeat([]byte{byte('a' + i)}, i*100)))
			tarb := archiveOf(t, File{Path: ".claude/projects/-w/c.jsonl", Content: content})
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.Save(ctx, Manifest{ID: "c", Agent: "claude"}, bytes.NewReader(tarb))
			}()
		}
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		_, rc, err := stores[0].Load(ctx, "c")
		require.NoError(t, err, "round %d: the conversation must stay loadable after two racing saves", round)
		_, err = ReadFiles(rc)
		rc.Close()
		require.NoError(t, err)
	}
}

// TestLoadWhileSavedOrRemoved: a load racing a save of the same id sees
// one whole version, never the new archive under the old manifest; a
// load racing a remove sees the conversation or a not-found error, never
// a manifest without its archive.
func TestLoadWhileSavedOrRemoved(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	writer, err := NewFileStore(dir, nil)
	require.NoError(t, err)
	reader, err := NewFileStore(dir, nil)
	require.NoError(t, err)
	save := func(round int) {
		content := []byte(fmt.Sprintf("round %d %s", round, bytes.Repeat([]byte{'x'}, round%7*50)))
		_, err := writer.Save(ctx, Manifest{ID: "c", Agent: "claude"}, bytes.NewReader(archiveOf(t, File{Path: ".claude/projects/-w/c.jsonl", Content: content})))
		require.NoError(t, err)
	}
	save(0)
	for round := 1; round <= 200; round++ {
		remove := round%2 == 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			if remove {
				require.NoError(t, writer.Delete(ctx, "c"))
			} else {
				save(round)
			}
		}()
		_, rc, err := reader.Load(ctx, "c")
		if err == nil {
			_, err = ReadFiles(rc)
			rc.Close()
		}
		<-done
		if remove && errors.Is(err, ErrNotFound) {
			err = nil
		}
		require.NoError(t, err, "round %d (remove %v)", round, remove)
		if remove {
			save(round)
		}
	}
}
