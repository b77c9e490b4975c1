package redisstore

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// encodeReply is what answer in lua/hot.lua returns for rep, asked for
// the reservation named asked (procs -1: not counted).
func encodeReply(rep reply, cooling bool, procs, rank int64, asked string) string {
	code := rep.status
	if cooling {
		code += 4
	}
	var tail []byte
	if rep.mark != rep.base {
		code += 256
		tail = appendDouble(tail, rep.mark)
	}
	if procs >= 0 {
		code += 1024
		tail = appendDouble(appendDouble(tail, procs), rank)
	}
	if rep.member != asked {
		code += 512
		tail = append(tail, rep.member...)
	}
	head := appendDouble(nil, code)
	for _, x := range []int64{int64(rep.wait / time.Microsecond), rep.now, rep.base} {
		head = appendDouble(head, x)
	}
	return string(append(head, tail...))
}

func appendDouble(b []byte, x int64) []byte {
	return binary.BigEndian.AppendUint64(b, math.Float64bits(float64(x)))
}

func TestDecodeReply(t *testing.T) {
	const asked = "r0000000000001a"
	now := int64(1_764_000_000_000_000)
	for _, tc := range []struct {
		name        string
		rep         reply
		procs, rank int64
	}{
		{"admitted at once", reply{status: recorded, now: now, mark: now, base: now, member: asked}, -1, -1},
		{"waits, counted", reply{status: recorded, wait: 3 * time.Millisecond, now: now, mark: now + 3000, base: now + 3000, member: asked}, 3, 1},
		{"a mark of its own", reply{status: toHold, wait: time.Second, now: now, mark: now + 999_000, base: now + 1_000_000, member: asked}, -1, -1},
		{"a claimed slot's name", reply{status: recorded, now: now, mark: now, base: now, member: "~17"}, -1, -1},
		{"all of it", reply{status: recorded, wait: 0, now: now, mark: now - 5, base: now, member: "~3"}, 2, 0},
		{"refused", reply{status: refused, wait: time.Minute, now: now, mark: now + 6e7, base: now + 6e7, member: asked}, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cooling := range []bool{false, true} {
				want := tc.rep
				want.cooling = cooling
				got, procs, rank, err := decodeReply(encodeReply(tc.rep, cooling, tc.procs, tc.rank, asked), asked)
				require.NoError(t, err)
				assert.Equal(t, want, got)
				assert.Equal(t, tc.procs, procs, "processes")
				assert.Equal(t, tc.rank, rank, "rank")
			}
		})
	}
	atOnce := encodeReply(reply{status: recorded, now: now, mark: now, base: now, member: asked}, false, -1, -1, asked)
	withName := encodeReply(reply{status: recorded, now: now, mark: now, base: now, member: "~1"}, false, -1, -1, asked)
	for name, v := range map[string]any{
		"a table, as before":      []any{int64(1), int64(0), now, now},
		"nothing":                 "",
		"short":                   atOnce[:31],
		"a name not flagged":      atOnce + "~1",
		"a flagged name missing":  withName[:32],
		"a flagged count missing": encodeReply(reply{status: recorded, now: now, mark: now, base: now, member: asked}, false, 2, 0, asked)[:40],
		"a number":                int64(1),
	} {
		_, _, _, err := decodeReply(v, asked)
		assert.Error(t, err, name)
	}
}

// Any reply is read without panicking, and every reply answer could
// write reads as written.
func FuzzDecodeReply(f *testing.F) {
	f.Add([]byte("r1"), int64(1), int64(0), int64(1_764_000_000_000_000), int64(0), int64(-1), int64(0), "r1", false)
	f.Add([]byte{}, int64(2), int64(5_000), int64(1), int64(-3), int64(4), int64(3), "~9", true)
	f.Fuzz(func(t *testing.T, raw []byte, status, wait, now, markOff, procs, rank int64, name string, cooling bool) {
		_, _, _, _ = decodeReply(string(raw), "r1")
		const bound = 1 << 52 // every number the scripts return is an integer below 2^53
		if status < 0 || status > 2 || wait <= -bound || wait >= bound || now < 0 || now >= bound ||
			markOff <= -bound || markOff >= bound || procs >= bound || rank < 0 || rank >= bound {
			return
		}
		rep := reply{status: status, wait: time.Duration(wait) * time.Microsecond, now: now, base: now, mark: now + markOff, member: name}
		if name == "" {
			rep.member = "r1" // answer writes no name it was not asked for
		}
		procs = max(procs, -1)
		if procs < 0 {
			rank = -1
		}
		got, gotProcs, gotRank, err := decodeReply(encodeReply(rep, cooling, procs, rank, "r1"), "r1")
		require.NoError(t, err)
		rep.cooling = cooling
		assert.Equal(t, rep, got)
		assert.Equal(t, procs, gotProcs)
		assert.Equal(t, rank, gotRank)
	})
}
