package batch_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
)

// ExampleRun runs two jobs with a turn function that stands in for a real
// runner: the first hits a quota with a reset, is parked until it, and
// resumes its conversation; the second succeeds at once.
func ExampleRun() {
	var mu sync.Mutex // turns and parked jobs run on their own goroutines
	clock := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	tries := map[string]int{}
	turn := func(_ context.Context, t batch.TurnRequest) (*harness.Result, error) {
		mu.Lock()
		tries[t.Job.ID]++
		first := tries[t.Job.ID] == 1
		mu.Unlock()
		res := &harness.Result{Agent: t.Agent, Conversation: "conv-" + t.Job.ID}
		if t.Job.ID == "a" && first {
			res.Err = &outposterr.Error{Class: outposterr.Quota, Message: "quota",
				Details: outposterr.Details{ResetAt: now().Add(time.Hour)}}
		}
		return res, res.Err
	}
	recs, err := batch.Run(context.Background(), []batch.Job{
		{ID: "a", Agent: "claude", Prompt: "task a"},
		{ID: "b", Agent: "codex", Prompt: "task b"},
	}, turn, batch.Options{
		Concurrency: 1,
		Now:         now,
		Sleep: func(_ context.Context, d time.Duration) error {
			mu.Lock()
			clock = clock.Add(d)
			mu.Unlock()
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	byJob := map[string]batch.Record{}
	for _, r := range recs {
		byJob[r.Job] = r
	}
	for _, id := range []string{"a", "b"} {
		r := byJob[id]
		fmt.Println(r.Job, r.Outcome.OK, "turns:", r.Turns, "parks:", r.Parks)
	}
	// Output:
	// a true turns: 2 parks: 1
	// b true turns: 1 parks: 0
}
