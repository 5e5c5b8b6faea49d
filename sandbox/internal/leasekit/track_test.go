package leasekit

import (
	"context"
	"errors"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

type fakeLease struct {
	id       string
	released *atomic.Int32
	err      error
}

func (l *fakeLease) ID() string { return l.id }
func (l *fakeLease) Release(context.Context) error {
	l.released.Add(1)
	return l.err
}

// TestTracker: live leases are listed and released together; an untracked
// one is neither; errors are joined.
func TestTracker(t *testing.T) {
	var tr Tracker[*fakeLease]
	var n atomic.Int32
	a, b, c := &fakeLease{id: "a", released: &n}, &fakeLease{id: "b", released: &n, err: errors.New("b failed")}, &fakeLease{id: "c", released: &n}
	tr.Track(a)
	tr.Track(b)
	tr.Track(c)
	tr.Untrack(c)
	ids := tr.Live()
	sort.Strings(ids)
	assert.Equal(t, []string{"a", "b"}, ids)
	err := tr.ReleaseAll(context.Background())
	assert.ErrorContains(t, err, "b failed")
	assert.Equal(t, int32(2), n.Load())
	var empty Tracker[*fakeLease]
	assert.Empty(t, empty.Live())
	assert.NoError(t, empty.ReleaseAll(context.Background()))
}

// TestReleaseAllWithin: a cancelled run still releases, bounded, with its
// context's values.
func TestReleaseAllWithin(t *testing.T) {
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	cancel()
	err := ReleaseAllWithin(ctx, func(ctx context.Context) error {
		assert.NoError(t, ctx.Err(), "not cancelled by the run")
		_, bounded := ctx.Deadline()
		assert.True(t, bounded)
		assert.Equal(t, "v", ctx.Value(key{}))
		return errors.New("released")
	}, time.Minute)
	assert.EqualError(t, err, "released")
}
