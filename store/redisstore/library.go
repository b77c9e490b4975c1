package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// How the store runs its scripts: as the functions of its library, once
// loaded (FUNCTION LOAD, FCALL), or, where the server refuses functions,
// as scripts (EVALSHA). A function call skips what every script would
// otherwise make on each call: hot.lua's functions.
const (
	libraryUnknown int32 = iota // not loaded yet
	libraryLoaded               // FCALL
	libraryRefused              // EVALSHA
)

// libraryLoader loads the store's library on the server, at first use and
// again when the server lost it (a restart without persistence, FUNCTION
// FLUSH, a new Cluster primary).
type libraryLoader struct {
	mu    sync.Mutex
	state atomic.Int32
}

// functions reports whether to call the scripts as functions, loading the
// library first when it is not loaded yet.
func (s *Store) functions(ctx context.Context) (bool, error) {
	switch s.lib.state.Load() {
	case libraryLoaded:
		return true, nil
	case libraryRefused:
		return false, nil
	}
	return s.loadLibrary(ctx, false)
}

// loadLibrary loads the library on the server (on every Cluster primary),
// unless it is loaded already and again is false, and reports whether
// functions are used. A server that refuses FUNCTION LOAD (no such
// command, or no permission for it) gets scripts from then on; any other
// failure is the call's.
func (s *Store) loadLibrary(ctx context.Context, again bool) (bool, error) {
	s.lib.mu.Lock()
	defer s.lib.mu.Unlock()
	switch st := s.lib.state.Load(); {
	case st == libraryRefused:
		return false, nil
	case st == libraryLoaded && !again:
		return true, nil
	}
	load := func(ctx context.Context, c redis.Cmdable) error {
		err := c.FunctionLoad(ctx, library).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	} else {
		err = load(ctx, s.client)
	}
	switch {
	case err == nil:
		if again {
			// Functions are kept with the data (RDB, AOF): a server that
			// lost them lost the budgets too.
			s.log.Info("WARNING: Redis lost the store's functions, and with them the budgets it held: restarted without its data, or flushed; budgets start again from what this process knows",
				"redis", s.url)
		}
		s.lib.state.Store(libraryLoaded)
		return true, nil
	case refusesFunctions(err):
		s.lib.state.Store(libraryRefused)
		s.log.Info("the Redis server refuses functions; the store runs its scripts with EVALSHA", "error", err.Error())
		return false, nil
	}
	return false, err
}

// refusesFunctions reports whether err is the server's refusal of
// FUNCTION LOAD: a command it does not know, or one the user may not run.
func refusesFunctions(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.HasPrefix(msg, "ERR unknown command") ||
		strings.HasPrefix(msg, "ERR unknown subcommand")
}

// functionMissing reports whether err says that the server does not have
// the called function: it lost the library.
func functionMissing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}

// run runs script sc on c, as a function or as a script.
func (s *Store) run(ctx context.Context, c redis.Cmdable, sc *script, keys []string, args ...any) *redis.Cmd {
	return s.runKeys(ctx, c, sc, keys, nil, args)
}

// runKeys is run with the keys also as arguments (keyArgs, nil: made
// here), made once per budget rather than on every call.
func (s *Store) runKeys(ctx context.Context, c redis.Cmdable, sc *script, keys []string, keyArgs, args []any) *redis.Cmd {
	if sc.fn == "" {
		return sc.eval.Run(ctx, c, keys, args...)
	}
	fn, err := s.functions(ctx)
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	if !fn {
		return sc.eval.Run(ctx, c, keys, args...)
	}
	cmd := fcall(ctx, c, sc, keys, keyArgs, args)
	if !functionMissing(cmd.Err()) {
		return cmd
	}
	if fn, err = s.loadLibrary(ctx, true); err != nil {
		cmd.SetErr(err)
		return cmd
	}
	if !fn {
		return sc.eval.Run(ctx, c, keys, args...)
	}
	return fcall(ctx, c, sc, keys, keyArgs, args)
}

// processor is a client that runs a command as it is made, as every
// go-redis client does.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// fcall is c.FCall of sc's function, with the function's name and the
// keys as arguments made once (keyArgs, nil: made here), not on every
// call: go-redis's FCall makes each a value of its own.
func fcall(ctx context.Context, c redis.Cmdable, sc *script, keys []string, keyArgs, args []any) *redis.Cmd {
	p, ok := c.(processor)
	if !ok || keyArgs == nil {
		return c.FCall(ctx, sc.fn, keys, args...)
	}
	a := make([]any, 0, 3+len(keyArgs)+len(args))
	a = append(append(append(a, "fcall", sc.fnArg, len(keyArgs)), keyArgs...), args...)
	cmd := redis.NewCmd(ctx, a...)
	cmd.SetFirstKeyPos(3) // as FCall does: a Cluster sends it to the keys' slot
	_ = p.Process(ctx, cmd)
	return cmd
}

// pipelined runs script sc on each of n budgets, in one pipeline; at(i)
// gives the i-th's keys and arguments.
func (s *Store) pipelined(ctx context.Context, sc *script, n int, at func(i int) ([]string, []any)) ([]*redis.Cmd, error) {
	fn, err := s.functions(ctx)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		if !fn {
			if err := sc.eval.Load(ctx, s.client).Err(); err != nil {
				return nil, err
			}
		}
		pipe := s.client.Pipeline()
		cmds := make([]*redis.Cmd, n)
		for i := range n {
			keys, args := at(i)
			if fn {
				cmds[i] = pipe.FCall(ctx, sc.fn, keys, args...)
			} else {
				cmds[i] = sc.eval.EvalSha(ctx, pipe, keys, args...)
			}
		}
		_, err := pipe.Exec(ctx)
		if !fn || try > 0 || !functionMissing(err) {
			return cmds, err
		}
		if fn, err = s.loadLibrary(ctx, true); err != nil {
			return nil, err
		}
	}
}
