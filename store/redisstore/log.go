package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
)

// go-redis (v9.23) logs through one process-wide logger, set with
// redis.SetLogger: its Options have no logger of their own, and a dial
// hook sees a failed dial but cannot keep the connection pool from logging
// it. So the store marks what it can, and LogRouter, once installed,
// sends the marked lines to the store's Logger:
//
//   - the context of every call the store makes, which go-redis passes
//     with what it logs while serving the call;
//   - the dial errors of the clients the store makes itself
//     (NewFromURL), through a dial hook: the pool dials on a
//     context of its own, and logs "failed to dial" with the error.
//
// NewFromURL installs the router once per process, its other lines to
// klog, so that nothing reaches raw standard error: redis.SetLogger
// replaces whatever logger the program set before (go-redis offers no way
// to read it back and pass the other lines on), so a program that wants
// its own sets it after making its first store. New, on a client the
// program owns, installs nothing.

// logKey is the context key of the store a call is made for.
type logKey struct{}

// logCtx returns ctx marked as the context of one of s's calls.
func (s *Store) logCtx(ctx context.Context) context.Context {
	if v, _ := ctx.Value(logKey{}).(*Store); v == s {
		return ctx
	}
	return context.WithValue(ctx, logKey{}, s)
}

// background returns the context of a call the store makes on its own.
func (s *Store) background() context.Context { return s.logCtx(context.Background()) }

// dialError is a failed dial of a client the store made. It reads,
// unwraps and times out as the error it carries.
type dialError struct {
	s   *Store
	err error
}

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// Timeout reports whether the dial timed out, for go-redis's checks.
func (e *dialError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.err, &t) && t.Timeout()
}

// dialMarker is a go-redis hook that marks the failed dials of a client
// the store made as the store's.
type dialMarker struct{ s *Store }

func (h dialMarker) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			err = &dialError{s: h.s, err: err}
		}
		return c, err
	}
}

func (dialMarker) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialMarker) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// markDials marks the failed dials of client, which the store made.
func (s *Store) markDials(client redis.UniversalClient) {
	switch c := client.(type) {
	case *redis.Client:
		c.AddHook(dialMarker{s})
	case *redis.ClusterClient:
		c.OnNewNode(func(n *redis.Client) { n.AddHook(dialMarker{s}) })
	}
}

// LogRouter is a logger for go-redis, installed by the first NewFromURL
// of a process with klog as Other, or by a program with
// redis.SetLogger(&redisstore.LogRouter{}). It sends each line go-redis
// logs about a Redis store's calls (such as "connection pool: failed to
// dial" during an outage) to that store's Logger at V(1), named go-redis:
// the store already logs the start and the end of an outage once each.
// Every other line goes to Other, and so do the lines about the dials of
// a client given to New: the program owns that client and its logs,
// and the store does not change its errors.
//
// It is safe for concurrent use. The zero value sends other lines to
// standard error, as go-redis's default logger writes them.
type LogRouter struct {
	// Other receives the lines that are not about a store's call, at
	// V(0). The zero Logger: standard error, in go-redis's own format.
	Other logr.Logger
}

// stderrLog writes as go-redis's default logger does.
var stderrLog = log.New(os.Stderr, "redis: ", log.LstdFlags|log.Lshortfile)

// Printf implements go-redis's logging interface.
func (r *LogRouter) Printf(ctx context.Context, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if s := storeOf(ctx, v); s != nil {
		s.log.WithName("go-redis").V(1).Info(strings.TrimPrefix(msg, "redis: "))
		return
	}
	if r.Other.GetSink() != nil {
		r.Other.Info(msg)
		return
	}
	// Frames: 1 this method, 2 go-redis's forwarding logger, 3 the line
	// that logs, as go-redis's default logger counts them.
	_ = stderrLog.Output(3, msg)
}

// storeOf returns the store a go-redis log line is about, from the
// context it came with or a dial error among its arguments, or nil.
func storeOf(ctx context.Context, args []any) *Store {
	if ctx != nil {
		if s, ok := ctx.Value(logKey{}).(*Store); ok {
			return s
		}
	}
	for _, a := range args {
		var de *dialError
		if err, ok := a.(error); ok && errors.As(err, &de) {
			return de.s
		}
	}
	return nil
}
