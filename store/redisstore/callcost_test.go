package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// BenchmarkRedisCallInstructions counts, as BenchmarkRedisInstructions
// does, what a script's call costs the server before any decision: the
// function call itself, each key and argument, and the reply's form. Its
// functions run no command; the arguments are as long as a reserve's.
//
//	K8SRATELIMIT_CALLGRIND=1 go test -run '^$' -bench RedisCallInstructions -benchtime 1x ./store/redisstore/
func BenchmarkRedisCallInstructions(b *testing.B) {
	needCallgrind(b)
	keys := []string{"{k}:v1:w", "{k}:v1:f", "{k}:v1:m", "{k}:v1:p", "{k}:v1:s"}
	args := []any{packedFloats(make([]float64, 18)...), "p-0123456789abcdef", "r0000000000001p-0123456789abcdef"}
	for _, c := range []struct {
		name, function string
		keys           []string
		args           []any
	}{
		{"1-key-returns-1", "one", keys[:1], nil},
		{"5-keys-returns-1", "one", keys, nil},
		{"5-keys-3-args-returns-1", "one", keys, args},
		{"5-keys-3-args-returns-table-of-1", "table_of_1", keys, args},
		{"5-keys-3-args-returns-table-of-4", "table_of_4", keys, args},
		{"5-keys-3-args-returns-string-of-4-packed", "string_of_4", keys, args},
	} {
		b.Run(c.name, func(b *testing.B) {
			countInstructions(b, redisKind{c.name, func(tb testing.TB, rc *redis.Client) redisAdmit {
				if err := rc.FunctionLoadReplace(context.Background(), callCostLibrary).Err(); err != nil {
					tb.Fatal(err)
				}
				return func(ctx context.Context, _ string) (bool, error) {
					err := rc.FCall(ctx, c.function, c.keys, c.args...).Err()
					return err == nil, err
				}
			}})
		})
	}
}

// callCostLibrary is BenchmarkRedisCallInstructions's functions.
const callCostLibrary = `#!lua name=reference_call_cost
local spack
redis.register_function('one', function(k, a) return 1 end)
redis.register_function('table_of_1', function(k, a) return {1} end)
redis.register_function('table_of_4', function(k, a) return {1, 0, 1764000000000000, 1764000000000000} end)
redis.register_function('string_of_4', function(k, a)
  if not spack then spack = struct.pack end
  return spack('>dddd', 1, 0, 1764000000000000, 1764000000000000)
end)
`
