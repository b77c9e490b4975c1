package redisstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// encodeReply is what answer in lua/hot.lua returns for rep, as go-redis
// reads it (procs and rank -1: not counted).
func encodeReply(rep reply, procs, rank int64) []any {
	return []any{rep.status, int64(rep.wait / time.Microsecond), int64(b2i(rep.cooling)), rep.now, rep.base, rep.mark, procs, rank, rep.member}
}

func TestDecodeReply(t *testing.T) {
	now := int64(1_764_000_000_000_000)
	rep := reply{status: recorded, wait: 3 * time.Millisecond, cooling: true, now: now, base: now + 3000, mark: now + 2999, member: "r0000000000001a"}
	got, procs, rank, err := decodeReply(encodeReply(rep, 3, 1))
	require.NoError(t, err)
	assert.Equal(t, rep, got)
	assert.EqualValues(t, 3, procs, "processes")
	assert.EqualValues(t, 1, rank, "rank")

	good := encodeReply(rep, -1, -1)
	for name, v := range map[string]any{
		"a string":         "r1",
		"a number":         int64(1),
		"short":            good[:8],
		"a name as number": append(append([]any{}, good[:8]...), int64(1)),
		"a number as text": append([]any{"1"}, good[1:]...),
	} {
		_, _, _, err := decodeReply(v)
		assert.Error(t, err, name)
	}
}

// Every reply answer could write reads as written.
func FuzzDecodeReply(f *testing.F) {
	f.Add(int64(1), int64(0), false, int64(1_764_000_000_000_000), int64(0), int64(-1), int64(-1), "r1")
	f.Add(int64(2), int64(5_000), true, int64(1), int64(-3), int64(4), int64(3), "~9")
	f.Fuzz(func(t *testing.T, status, wait int64, cooling bool, now, markOff, procs, rank int64, name string) {
		wait = max(min(wait, 1<<40), -(1 << 40))
		rep := reply{status: status, wait: time.Duration(wait) * time.Microsecond, cooling: cooling, now: now, base: now, mark: now + markOff, member: name}
		got, gotProcs, gotRank, err := decodeReply(encodeReply(rep, procs, rank))
		require.NoError(t, err)
		assert.Equal(t, rep, got)
		assert.Equal(t, procs, gotProcs)
		assert.Equal(t, rank, gotRank)
	})
}
