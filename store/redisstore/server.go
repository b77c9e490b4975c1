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

// checkServer checks the server once, at start: one that cannot be used
// (down, a wrong password, scripting refused) starts an outage, reported
// once, rather than at the first request; one that cannot keep budgets
// reliably (older than Redis 7, or a maxmemory-policy that may evict them:
// an evicted budget is a silent reset) is warned about once.
func (s *Store) checkServer() {
	defer s.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*s.opts.Timeout)
	defer cancel()
	if err := s.checkUsable(ctx); err != nil {
		if !s.closed() {
			s.trip(err)
		}
		return
	}
	if info, err := s.client.Info(ctx, "server").Result(); err == nil {
		if v := infoField(info, "redis_version"); v != "" && major(v) < 7 && infoField(info, "valkey_version") == "" {
			s.log.Info("WARNING: Redis older than 7 is not supported by the Redis store", "redis", s.url, "version", v)
		}
	}
	if cfg, err := s.client.ConfigGet(ctx, "maxmemory-policy").Result(); err == nil {
		if p, ok := cfg["maxmemory-policy"]; ok && p != "noeviction" {
			s.log.Info("WARNING: Redis may evict budgets under memory pressure, silently resetting them; set maxmemory-policy noeviction",
				"redis", s.url, "maxmemory-policy", p)
		}
	}
}

// scriptUsable is the script checkUsable runs where functions are refused.
var scriptUsable = redis.NewScript("return 1")

// checkUsable asks the server to answer and to run the store's code, as
// every decision does: its functions, or else scripts.
func (s *Store) checkUsable(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return err
	}
	fn, err := s.functions(ctx)
	if err != nil || fn {
		return err
	}
	return scriptUsable.Run(ctx, s.client, nil).Err()
}

// closed reports whether Close has been called.
func (s *Store) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
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
