package redisstore

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// clientFromURL builds a client from a redis:// or rediss:// URL: a Redis
// Cluster client when the URL names more nodes with addr= parameters, a
// standalone client otherwise. Every call honours its context's deadline.
func clientFromURL(rawURL string, timeout time.Duration) (redis.UniversalClient, error) {
	if timeout <= 0 {
		timeout = 500 * time.Millisecond
	}
	if err := CheckURL(rawURL); err != nil {
		return nil, fmt.Errorf("store: redis URL: %w", err)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store: redis URL: not a valid URL")
	}
	if u.Query().Has("addr") {
		o, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("store: redis URL: %s", goRedisReason(err))
		}
		o.ContextTimeoutEnabled = true
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, timeout, timeout
		o.MaxRetries = -1
		if u.Scheme == "rediss" && o.TLSConfig == nil {
			o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		return redis.NewClusterClient(o), nil
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store: redis URL: %s", goRedisReason(err))
	}
	o.ContextTimeoutEnabled = true
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, timeout, timeout
	o.MaxRetries = -1
	return redis.NewClient(o), nil
}

// checkServer warns once, at start, when the server cannot keep budgets
// reliably: older than Redis 7, or with a maxmemory-policy that may evict
// them (an evicted budget is a silent reset).
func (s *Store) checkServer() {
	defer s.wg.Done()
	ctx, cancel := context.WithTimeout(s.background(), 5*s.opts.Timeout)
	defer cancel()
	if info, err := s.client.Info(ctx, "server").Result(); err == nil {
		if v := infoField(info, "redis_version"); v != "" && major(v) < 7 && infoField(info, "valkey_version") == "" {
			s.log.Info("WARNING: Redis older than 7 is not supported by the Redis store", "version", v)
		}
	}
	if cfg, err := s.client.ConfigGet(ctx, "maxmemory-policy").Result(); err == nil {
		if p, ok := cfg["maxmemory-policy"]; ok && p != "noeviction" {
			s.log.Info("WARNING: Redis may evict budgets under memory pressure, silently resetting them; set maxmemory-policy noeviction", "maxmemory-policy", p)
		}
	}
}

// infoField returns a field of an INFO reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

func major(version string) int {
	n, _ := strconv.Atoi(strings.SplitN(version, ".", 2)[0])
	return n
}

// boundsCalls reports whether client bounds every call by timeout on its
// own: it honours context deadlines and its dial, pool, read and write
// timeouts are all positive and no longer than timeout.
func boundsCalls(client redis.UniversalClient, timeout time.Duration) bool {
	within := func(ds ...time.Duration) bool {
		for _, d := range ds {
			if d <= 0 || d > timeout {
				return false
			}
		}
		return true
	}
	switch c := client.(type) {
	case *redis.Client:
		o := c.Options()
		return o.ContextTimeoutEnabled && within(o.DialTimeout, o.PoolTimeout, o.ReadTimeout, o.WriteTimeout)
	case *redis.ClusterClient:
		o := c.Options()
		return o.ContextTimeoutEnabled && within(o.DialTimeout, o.PoolTimeout, o.ReadTimeout, o.WriteTimeout)
	}
	return false
}
