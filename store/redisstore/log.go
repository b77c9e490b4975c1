package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
)

// go-redis (v9.23) logs through one process-wide logger, set with
// redis.SetLogger, by default to standard error: during an outage it
// writes "connection pool: failed to dial" for every dial that fails. The
// store reports an outage once when it starts and once when it ends; so
// the first store NewFromURL makes installs goRedisLog once per process,
// which passes go-redis's lines to klog at V(1), named go-redis: nothing
// reaches raw standard error, and the detail is there for whoever raises
// the verbosity. A program that wants them elsewhere calls
// redis.SetLogger after making its first store. New, on a client the
// program owns, installs nothing.
type goRedisLog struct{ l logr.Logger }

// Printf implements go-redis's logging interface.
func (g goRedisLog) Printf(_ context.Context, format string, v ...any) {
	g.l.V(1).Info(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
}

// routeOnce installs goRedisLog once per process.
var routeOnce sync.Once

// routeGoRedisLogs sends go-redis's log lines to klog, once per process.
func routeGoRedisLogs() {
	routeOnce.Do(func() { redis.SetLogger(goRedisLog{l: klogLogger().WithName("go-redis")}) })
}
