package k8sratelimit

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

// withDefaults returns DefaultConfig changed by f.
func withDefaults(f func(c *Config)) Config {
	c := DefaultConfig()
	f(&c)
	return c
}

func TestLoadConfigDefaults(t *testing.T) {
	got, err := LoadConfig(nil)
	require.NoError(t, err)
	assert.Equal(t, DefaultConfig(), got)
	assert.NoError(t, got.Validate())

	got, err = LoadConfig([]string{"PATH=/bin", "HOME=/root", "KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_PORT=tcp://10.0.0.1:443",
		"KUBERNETES_RATELIMITER_URL=http://other.example", "MY_KUBERNETES_RATELIMIT=1", "KUBERNETES_RATELIMITERS=1"})
	require.NoError(t, err)
	assert.Equal(t, DefaultConfig(), got, "variables outside KUBERNETES_RATELIMIT* are not read")
}

func TestLoadConfigAccepts(t *testing.T) {
	tests := []struct {
		env  string
		want Config
	}{
		// ENABLED
		{"KUBERNETES_RATELIMIT_ENABLED=true", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_ENABLED=TRUE", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_ENABLED=1", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_ENABLED=yes", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_ENABLED=On", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_ENABLED=false", withDefaults(func(c *Config) { c.Enabled = false })},
		{"KUBERNETES_RATELIMIT_ENABLED=0", withDefaults(func(c *Config) { c.Enabled = false })},
		{"KUBERNETES_RATELIMIT_ENABLED=no", withDefaults(func(c *Config) { c.Enabled = false })},
		{"KUBERNETES_RATELIMIT_ENABLED=OFF", withDefaults(func(c *Config) { c.Enabled = false })},
		{"KUBERNETES_RATELIMIT_ENABLED=", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_ENABLED=  ", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_ENABLED", DefaultConfig()},
		// CLASSES
		{"KUBERNETES_RATELIMIT_CLASSES=on", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_CLASSES=OFF", withDefaults(func(c *Config) { c.ClassesOff = true })},
		{"KUBERNETES_RATELIMIT_CLASSES=write=8,read=4,list=2,event=1", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_CLASSES= Write = 20 , event=3", withDefaults(func(c *Config) {
			c.ClassWeights = ClassWeights{Write: 20, Read: 4, List: 2, Event: 3}
		})},
		{"KUBERNETES_RATELIMIT_CLASSES=list=100", withDefaults(func(c *Config) {
			c.ClassWeights = ClassWeights{Write: 8, Read: 4, List: 100, Event: 1}
		})},
		// LIMIT
		{"KUBERNETES_RATELIMIT=1", withDefaults(func(c *Config) { c.Limit = 1 })},
		{"KUBERNETES_RATELIMIT=10000", withDefaults(func(c *Config) { c.Limit = 10000 })},
		{"KUBERNETES_RATELIMIT= 50 ", withDefaults(func(c *Config) { c.Limit = 50 })},
		{"KUBERNETES_RATELIMIT=0050", withDefaults(func(c *Config) { c.Limit = 50 })},
		{"KUBERNETES_RATELIMIT=1000000\nKUBERNETES_RATELIMIT_STRATEGY=linear", withDefaults(func(c *Config) {
			c.Limit, c.Strategy, c.Burst = 1000000, StrategyLinear, 1
		})},
		// TIMESPAN
		{"KUBERNETES_RATELIMIT_TIMESPAN=second", withDefaults(func(c *Config) { c.Timespan = time.Second })},
		{"KUBERNETES_RATELIMIT_TIMESPAN=Minute", withDefaults(func(c *Config) { c.Timespan = time.Minute })},
		{"KUBERNETES_RATELIMIT_TIMESPAN=HOUR", withDefaults(func(c *Config) { c.Timespan = time.Hour })},
		{"KUBERNETES_RATELIMIT_TIMESPAN=day", withDefaults(func(c *Config) { c.Timespan = 24 * time.Hour })},
		// ADAPTIVE
		{"KUBERNETES_RATELIMIT_ADAPTIVE=off", withDefaults(func(c *Config) { c.Adaptive = false })},
		{"KUBERNETES_RATELIMIT_ADAPTIVE=Yes", DefaultConfig()},
		// MAX_WAIT
		{"KUBERNETES_RATELIMIT_MAX_WAIT=0", withDefaults(func(c *Config) { c.MaxWait = new(time.Duration(0)) })},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=2000", withDefaults(func(c *Config) { c.MaxWait = new(2 * time.Second) })},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=2s", withDefaults(func(c *Config) { c.MaxWait = new(2 * time.Second) })},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=1500ms", withDefaults(func(c *Config) { c.MaxWait = new(1500 * time.Millisecond) })},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=1m", withDefaults(func(c *Config) { c.MaxWait = new(time.Minute) })},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=0s", withDefaults(func(c *Config) { c.MaxWait = new(time.Duration(0)) })},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=24h", withDefaults(func(c *Config) { c.MaxWait = new(24 * time.Hour) })},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=86400000", withDefaults(func(c *Config) { c.MaxWait = new(24 * time.Hour) })},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=1h30m", withDefaults(func(c *Config) { c.MaxWait = new(90 * time.Minute) })},
		// JITTER
		{"KUBERNETES_RATELIMIT_JITTER=250", withDefaults(func(c *Config) { c.Jitter = 250 * time.Millisecond })},
		{"KUBERNETES_RATELIMIT_JITTER=250ms", withDefaults(func(c *Config) { c.Jitter = 250 * time.Millisecond })},
		{"KUBERNETES_RATELIMIT_JITTER=60s", withDefaults(func(c *Config) { c.Jitter = time.Minute })},
		{"KUBERNETES_RATELIMIT_JITTER=60000", withDefaults(func(c *Config) { c.Jitter = time.Minute })},
		{"KUBERNETES_RATELIMIT_JITTER=0", DefaultConfig()},
		// OWNER
		{"KUBERNETES_RATELIMIT_OWNER=team-a.prod_1", withDefaults(func(c *Config) { c.Owner = "team-a.prod_1" })},
		{"KUBERNETES_RATELIMIT_OWNER=" + strings.Repeat("x", 63), withDefaults(func(c *Config) { c.Owner = strings.Repeat("x", 63) })},
		// STRATEGY and BURST
		{"KUBERNETES_RATELIMIT_STRATEGY=window", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_STRATEGY=linear", withDefaults(func(c *Config) { c.Strategy, c.Burst = StrategyLinear, 1 })},
		{"KUBERNETES_RATELIMIT_STRATEGY=linear\nKUBERNETES_RATELIMIT_BURST=400", withDefaults(func(c *Config) { c.Strategy, c.Burst = StrategyLinear, 400 })},
		{"KUBERNETES_RATELIMIT_STRATEGY=linear\nKUBERNETES_RATELIMIT_BURST=1", withDefaults(func(c *Config) { c.Strategy, c.Burst = StrategyLinear, 1 })},
		{"KUBERNETES_RATELIMIT_BURST=", DefaultConfig()},
		// STORE, REDIS_URL, STORE_FAILURE
		{"KUBERNETES_RATELIMIT_STORE=memory", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_REDIS_URL=not a url at all", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_STORE=memory\nKUBERNETES_RATELIMIT_REDIS_URL=http://nonsense", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://redis:6379/0", withDefaults(func(c *Config) {
			c.Store, c.Owner, c.RedisURL = StoreRedis, "ops", NewSecretURL("redis://redis:6379/0")
		})},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=rediss://:s3cret@redis.example", withDefaults(func(c *Config) {
			c.Store, c.Owner, c.RedisURL = StoreRedis, "ops", NewSecretURL("rediss://:s3cret@redis.example")
		})},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://user:pw@[::1]:6380/3?dial_timeout=1s", withDefaults(func(c *Config) {
			c.Store, c.Owner, c.RedisURL = StoreRedis, "ops", NewSecretURL("redis://user:pw@[::1]:6380/3?dial_timeout=1s")
		})},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://a:6379?addr=b:6379&addr=c:6379", withDefaults(func(c *Config) {
			c.Store, c.Owner, c.RedisURL = StoreRedis, "ops", NewSecretURL("redis://a:6379?addr=b:6379&addr=c:6379")
		})},
		{"KUBERNETES_RATELIMIT_STORE_FAILURE=local", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_STORE_FAILURE=open", withDefaults(func(c *Config) { c.StoreFailure = FailureOpen })},
		{"KUBERNETES_RATELIMIT_STORE_FAILURE=closed", withDefaults(func(c *Config) { c.StoreFailure = FailureClosed })},
		// ENABLED=false short-circuits everything else, even nonsense.
		{"KUBERNETES_RATELIMIT_ENABLED=false\nKUBERNETES_RATELIMIT=-5\nKUBERNETES_RATELIMIT_MAXWAIT=1\nKUBERNETES_RATELIMIT_STORE=redis", withDefaults(func(c *Config) { c.Enabled = false })},
		// Service links of Services named kubernetes-ratelimit and kubernetes-ratelimit-redis.
		{serviceLinks("KUBERNETES_RATELIMIT_REDIS"), DefaultConfig()},
		{serviceLinks("KUBERNETES_RATELIMIT"), DefaultConfig()},
		{serviceLinks("KUBERNETES_RATELIMIT_REDIS_PRIMARY_2"), DefaultConfig()},
		{serviceLinks("KUBERNETES_RATE_LIMIT"), DefaultConfig()},
		{serviceLinks("KUBERNETES_RATELIMITS_REDIS"), DefaultConfig()},
		{"KUBERNETES_RATELIMIT_REDIS_SERVICE_HOST=fd00::12\nKUBERNETES_RATELIMIT_REDIS_PORT=tcp://[fd00::12]:6379\nKUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP_ADDR=fd00::12", DefaultConfig()},
		{"KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP_SERVICE_PORT=6379", DefaultConfig()}, // a Service named kubernetes-ratelimit-redis-port-6379-tcp
		{"KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP_PORT=6379", DefaultConfig()},
		// The same variable twice with the same value.
		{"KUBERNETES_RATELIMIT=5\nKUBERNETES_RATELIMIT=5", withDefaults(func(c *Config) { c.Limit = 5 })},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			got, err := LoadConfig(strings.Split(tt.env, "\n"))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.NoError(t, got.Validate())
			assert.Equal(t, got, loadDescribed(t, got), "what Describe prints loads back as the same Config")
		})
	}
}

// loadDescribed loads what cfg.Describe prints, each value under its
// variable, and returns the Config it gives. The Redis URL is printed
// redacted by design: it is checked to be, and loaded as it really is.
func loadDescribed(t *testing.T, cfg Config) Config {
	t.Helper()
	var environ []string
	for _, kv := range cfg.Describe() {
		name, value := kv[0], kv[1]
		if name == EnvRedisURL {
			assert.Equal(t, cfg.RedisURL.String(), value)
			value = cfg.RedisURL.Reveal()
		}
		environ = append(environ, name+"="+value)
	}
	got, err := LoadConfig(environ)
	require.NoError(t, err, "loading %q", environ)
	return got
}

func TestDescribe(t *testing.T) {
	got := DefaultConfig().Describe()
	want := [][2]string{
		{EnvEnabled, "true"}, {EnvLimit, "400"}, {EnvTimespan, "minute"}, {EnvAdaptive, "true"},
		{EnvMaxWait, ""}, {EnvJitter, "0s"}, {EnvOwner, "default"}, {EnvStrategy, "window"},
		{EnvBurst, ""}, {EnvStore, "memory"}, {EnvRedisURL, ""}, {EnvStoreFailure, "local"},
		{EnvConcurrency, "auto"}, {EnvConcurrencyMax, "100"},
		{EnvClasses, "write=8,read=4,list=2,event=1"},
	}
	assert.Equal(t, want, got, "the ceiling of auto is shown as the one in effect")

	for _, c := range []Config{
		withDefaults(func(c *Config) { c.MaxConcurrency = 40 }),
		DefaultConfig(), // CONCURRENCY_MAX=100 as printed loads as unset
		withDefaults(func(c *Config) { c.Concurrency = 3 }),
		withDefaults(func(c *Config) { c.Concurrency = ConcurrencyOff }),
		withDefaults(func(c *Config) { c.ClassesOff = true }),
		withDefaults(func(c *Config) { c.ClassWeights = ClassWeights{Write: 20, Read: 4, List: 2, Event: 1} }),
	} {
		assert.Equal(t, c, loadDescribed(t, c), "concurrency %d, max %d, classes %v", c.Concurrency, c.MaxConcurrency, c.describeClasses())
	}

	c := withDefaults(func(c *Config) {
		c.Timespan, c.MaxWait, c.Jitter, c.Strategy, c.Burst = 24*time.Hour, new(90*time.Minute), 250*time.Millisecond, StrategyLinear, 5
	})
	assert.Equal(t, "day", c.Describe()[2][1])
	assert.Equal(t, "1h30m0s", c.Describe()[4][1])
	assert.Equal(t, "250ms", c.Describe()[5][1])
	assert.Equal(t, "5", c.Describe()[8][1])
	assert.Equal(t, c, loadDescribed(t, c))

	assert.Equal(t, "1.5s", withDefaults(func(c *Config) { c.Timespan = 1500 * time.Millisecond }).Describe()[2][1],
		"a timespan set in code that has no name is a Go duration")
	assert.Equal(t, "enabled=true limit=400 timespan=minute adaptive=true max_wait= jitter=0s owner=default strategy=window burst= store=memory redis_url= store_failure=local concurrency=auto concurrency_max=100 classes=write=8,read=4,list=2,event=1",
		DefaultConfig().String())
}

// serviceLinks returns the variables Kubernetes injects for a Service whose
// variable prefix is svc, with ports named "redis" (6379/TCP) and
// "metrics-http" (9121/UDP).
func serviceLinks(svc string) string {
	return strings.Join([]string{
		svc + "_SERVICE_HOST=10.96.0.12",
		svc + "_SERVICE_PORT=6379",
		svc + "_SERVICE_PORT_REDIS=6379",
		svc + "_SERVICE_PORT_METRICS_HTTP=9121",
		svc + "_PORT=tcp://10.96.0.12:6379",
		svc + "_PORT_6379_TCP=tcp://10.96.0.12:6379",
		svc + "_PORT_6379_TCP_PROTO=tcp",
		svc + "_PORT_6379_TCP_PORT=6379",
		svc + "_PORT_6379_TCP_ADDR=10.96.0.12",
		svc + "_PORT_9121_UDP=udp://10.96.0.12:9121",
		svc + "_PORT_9121_SCTP_ADDR=10.96.0.12",
	}, "\n")
}

func TestLoadConfigRejects(t *testing.T) {
	tests := []struct {
		env       string
		key       string
		value     string
		reasonHas string
	}{
		// ENABLED
		{"KUBERNETES_RATELIMIT_ENABLED=maybe", EnvEnabled, "maybe", "true, false"},
		{"KUBERNETES_RATELIMIT_ENABLED=t", EnvEnabled, "t", "true, false"},
		{"KUBERNETES_RATELIMIT_ENABLED=2", EnvEnabled, "2", "true, false"},
		// LIMIT
		{"KUBERNETES_RATELIMIT=0", EnvLimit, "0", "from 1 to 1000000"},
		{"KUBERNETES_RATELIMIT=-1", EnvLimit, "-1", "from 1 to 1000000"},
		{"KUBERNETES_RATELIMIT=+5", EnvLimit, "+5", "integer"},
		{"KUBERNETES_RATELIMIT=1000001", EnvLimit, "1000001", "from 1 to 1000000"},
		{"KUBERNETES_RATELIMIT=99999999999999999999999", EnvLimit, "99999999999999999999999", "from 1 to 1000000"},
		{"KUBERNETES_RATELIMIT=400.5", EnvLimit, "400.5", "integer"},
		{"KUBERNETES_RATELIMIT=1_000", EnvLimit, "1_000", "integer"},
		{"KUBERNETES_RATELIMIT=lots", EnvLimit, "lots", "integer"},
		{"KUBERNETES_RATELIMIT=10001", EnvLimit, "10001", "at most 10000 with KUBERNETES_RATELIMIT_STRATEGY=window"},
		{"KUBERNETES_RATELIMIT=010001", EnvLimit, "010001", "at most 10000"},
		// CLASSES
		{"KUBERNETES_RATELIMIT_CLASSES=yes", EnvClasses, "yes", "on, off, or weights"},
		{"KUBERNETES_RATELIMIT_CLASSES=write=0", EnvClasses, "write=0", `weight of write "0"`},
		{"KUBERNETES_RATELIMIT_CLASSES=write=101", EnvClasses, "write=101", "from 1 to 100"},
		{"KUBERNETES_RATELIMIT_CLASSES=writes=2", EnvClasses, "writes=2", `no class "writes"`},
		{"KUBERNETES_RATELIMIT_CLASSES=lease=2", EnvClasses, "lease=2", `no class "lease"`},
		{"KUBERNETES_RATELIMIT_CLASSES=write=2,write=3", EnvClasses, "write=2,write=3", "class write given twice"},
		{"KUBERNETES_RATELIMIT_CLASSES=write=2,", EnvClasses, "write=2,", "on, off, or weights"},
		{"KUBERNETES_RATELIMIT_CLASSES=write:2", EnvClasses, "write:2", "on, off, or weights"},
		{"KUBERNETES_RATELIMIT_CLASSES=read=1.5", EnvClasses, "read=1.5", `weight of read "1.5"`},
		// TIMESPAN
		{"KUBERNETES_RATELIMIT_TIMESPAN=week", EnvTimespan, "week", "second, minute, hour, day"},
		{"KUBERNETES_RATELIMIT_TIMESPAN=1m", EnvTimespan, "1m", "second, minute, hour, day"},
		{"KUBERNETES_RATELIMIT_TIMESPAN=minutes", EnvTimespan, "minutes", "second, minute, hour, day"},
		// ADAPTIVE
		{"KUBERNETES_RATELIMIT_ADAPTIVE=enabled", EnvAdaptive, "enabled", "true, false"},
		// MAX_WAIT
		{"KUBERNETES_RATELIMIT_MAX_WAIT=-1", EnvMaxWait, "-1", "from 0 (never wait) to 24h"},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=-1s", EnvMaxWait, "-1s", "to 24h"},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=25h", EnvMaxWait, "25h", "to 24h"},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=86400001", EnvMaxWait, "86400001", "to 24h"},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=1.5", EnvMaxWait, "1.5", "milliseconds"},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=2 s", EnvMaxWait, "2 s", "milliseconds"},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=soon", EnvMaxWait, "soon", "milliseconds"},
		{"KUBERNETES_RATELIMIT_MAX_WAIT=99999999999999999999", EnvMaxWait, "99999999999999999999", "to 24h"},
		// JITTER
		{"KUBERNETES_RATELIMIT_JITTER=61s", EnvJitter, "61s", "from 0 to 60s"},
		{"KUBERNETES_RATELIMIT_JITTER=60001", EnvJitter, "60001", "from 0 to 60s"},
		{"KUBERNETES_RATELIMIT_JITTER=-5ms", EnvJitter, "-5ms", "from 0 to 60s"},
		{"KUBERNETES_RATELIMIT_JITTER=some", EnvJitter, "some", "milliseconds"},
		// OWNER
		{"KUBERNETES_RATELIMIT_OWNER=" + strings.Repeat("x", 64), EnvOwner, strings.Repeat("x", 64), "1 to 63 characters"},
		{"KUBERNETES_RATELIMIT_OWNER=team a", EnvOwner, "team a", "A-Z a-z 0-9 . _ -"},
		{"KUBERNETES_RATELIMIT_OWNER=team:a", EnvOwner, "team:a", "A-Z a-z 0-9 . _ -"},
		{"KUBERNETES_RATELIMIT_OWNER=équipe", EnvOwner, "équipe", "A-Z a-z 0-9 . _ -"},
		// STRATEGY
		{"KUBERNETES_RATELIMIT_STRATEGY=sliding", EnvStrategy, "sliding", "window, linear"},
		{"KUBERNETES_RATELIMIT_STRATEGY=Window", EnvStrategy, "Window", "window, linear"},
		// BURST
		{"KUBERNETES_RATELIMIT_BURST=1", EnvBurst, "1", "only accepted with KUBERNETES_RATELIMIT_STRATEGY=linear"},
		{"KUBERNETES_RATELIMIT_BURST=10\nKUBERNETES_RATELIMIT_STRATEGY=window", EnvBurst, "10", "only accepted with"},
		{"KUBERNETES_RATELIMIT_STRATEGY=linear\nKUBERNETES_RATELIMIT_BURST=0", EnvBurst, "0", "from 1 to the limit"},
		{"KUBERNETES_RATELIMIT_STRATEGY=linear\nKUBERNETES_RATELIMIT_BURST=401", EnvBurst, "401", "from 1 to the limit (400)"},
		{"KUBERNETES_RATELIMIT_STRATEGY=linear\nKUBERNETES_RATELIMIT=10\nKUBERNETES_RATELIMIT_BURST=11", EnvBurst, "11", "from 1 to the limit (10)"},
		{"KUBERNETES_RATELIMIT_STRATEGY=linear\nKUBERNETES_RATELIMIT_BURST=two", EnvBurst, "two", "integer"},
		// STORE
		{"KUBERNETES_RATELIMIT_STORE=etcd", EnvStore, "etcd", "memory, redis"},
		{"KUBERNETES_RATELIMIT_STORE=Redis", EnvStore, "Redis", "memory, redis"},
		// OWNER is required with redis, before REDIS_URL.
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_REDIS_URL=redis://r:6379", EnvOwner, "", "must be set with KUBERNETES_RATELIMIT_STORE=redis"},
		{"KUBERNETES_RATELIMIT_STORE=redis", EnvOwner, "", "must be set with KUBERNETES_RATELIMIT_STORE=redis"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=default\nKUBERNETES_RATELIMIT_REDIS_URL=redis://r", EnvOwner, "default", "other than \"default\""},
		// REDIS_URL
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops", EnvRedisURL, "", "required with KUBERNETES_RATELIMIT_STORE=redis"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=  ", EnvRedisURL, "", "required"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=http://u:hunter2@r:6379", EnvRedisURL, "http://u:xxxxx@r:6379", "scheme is not redis or rediss"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=unix:///run/redis.sock", EnvRedisURL, "unix:///run/redis.sock", "scheme is not redis or rediss"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis-master:6379", EnvRedisURL, "<redacted>", "redis:// or rediss://"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=hunter2", EnvRedisURL, "<redacted>", "redis:// or rediss://"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://:6379", EnvRedisURL, "redis://:6379", "no host"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://:hunter2@r:99999", EnvRedisURL, "redis://:xxxxx@r:99999", "port"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://:hun%zzter2@r", EnvRedisURL, "redis://<redacted>", "not a valid URL"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://:hunter2@r:0", EnvRedisURL, "redis://:xxxxx@r:0", "port"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://r/x", EnvRedisURL, "redis://r/x", "database number"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://r/0?colour=blue", EnvRedisURL, "redis://r/0?colour=xxxxx", "unexpected option"},
		// A query that does not parse cleanly, whatever go-redis makes of it.
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://redis:6379/0?dial_timeout=1s;password=hunter2", EnvRedisURL, "redis://redis:6379/0?dial_timeout=xxxxx;password=xxxxx", "the query is not name=value pairs"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://redis:6379/0?;password=hunter2", EnvRedisURL, "redis://redis:6379/0?;password=xxxxx", "the query is not name=value pairs"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://redis:6379/0?password=hunter2%zz", EnvRedisURL, "redis://redis:6379/0?password=xxxxx", "valid %-escapes"},
		// go-redis's own message quotes the value: it is left out.
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://r?dial_timeout=hunter2", EnvRedisURL, "redis://r?dial_timeout=xxxxx", "invalid dial_timeout duration"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://r?token=hunter2", EnvRedisURL, "redis://r?token=xxxxx", "unexpected option"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://:hunter2@redis:6379:1", EnvRedisURL, "redis://:xxxxx@redis:6379:1", "not host:port"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://r:/0", EnvRedisURL, "redis://r:/0", "port is empty"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://r/0#hunter2", EnvRedisURL, "redis://r/0#xxxxx", "fragment"},
		// Each names the culprit and what to write instead.
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://:hun#ter2@r:6379/0", EnvRedisURL, "redis://<redacted>", `holds "#", which ends the address part of a URL: percent-encode it as %23`},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://:hunter2@r:99999", EnvRedisURL, "redis://:xxxxx@r:99999", "the port 99999 is not a number from 1 to 65535"},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://r:6379/0?password=hunter2", EnvRedisURL, "redis://r:6379/0?password=xxxxx", `unexpected option "password": put the password in the user-info part, redis://:PASSWORD@host:6379/0`},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=redis://r/0?colour=hunter2", EnvRedisURL, "redis://r/0?colour=xxxxx", `unexpected option "colour": accepted are client_name,`},
		// STORE_FAILURE
		{"KUBERNETES_RATELIMIT_STORE_FAILURE=fallback", EnvStoreFailure, "fallback", "local, open, closed"},
		{"KUBERNETES_RATELIMIT_STORE_FAILURE=OPEN", EnvStoreFailure, "OPEN", "local, open, closed"},
		// Unknown variables, whose values are never shown.
		{"KUBERNETES_RATELIMIT_MAXWAIT=2s", "KUBERNETES_RATELIMIT_MAXWAIT", "", "did you mean KUBERNETES_RATELIMIT_MAX_WAIT?"},
		{"KUBERNETES_RATELIMIT_LIMIT=5", "KUBERNETES_RATELIMIT_LIMIT", "", "not a known variable"},
		{"KUBERNETES_RATELIMIT_REDIS_PASSWORD=hunter2", "KUBERNETES_RATELIMIT_REDIS_PASSWORD", "", "not a known variable"},
		{"KUBERNETES_RATELIMIT_=1", "KUBERNETES_RATELIMIT_", "", "not a known variable"},
		{"KUBERNETES_RATELIMIT_REDIS_SERVICE_HOSTNAME=x", "KUBERNETES_RATELIMIT_REDIS_SERVICE_HOSTNAME", "", "not a known variable"},
		{"KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP_HOST=x", "KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP_HOST", "", "not a known variable"},
		{"KUBERNETES_RATELIMIT_REDIS_PORT_6379_HTTP=x", "KUBERNETES_RATELIMIT_REDIS_PORT_6379_HTTP", "", "not a known variable"},
		// Unknown names come before bad values, and are checked only when enabled.
		{"KUBERNETES_RATELIMIT=zero\nKUBERNETES_RATELIMIT_TIMESPAM=second", "KUBERNETES_RATELIMIT_TIMESPAM", "", "did you mean KUBERNETES_RATELIMIT_TIMESPAN?"},
		// Near misses of a known name, whose values are never shown.
		{"KUBERNETES_RATELIMITS=400", "KUBERNETES_RATELIMITS", "", "did you mean KUBERNETES_RATELIMIT?"},
		{"KUBERNETES_RATE_LIMIT=400", "KUBERNETES_RATE_LIMIT", "", "did you mean KUBERNETES_RATELIMIT?"},
		{"kubernetes_ratelimit=400", "kubernetes_ratelimit", "", "upper case); did you mean KUBERNETES_RATELIMIT?"},
		{"Kubernetes_RateLimit_Timespan=day", "Kubernetes_RateLimit_Timespan", "", "did you mean KUBERNETES_RATELIMIT_TIMESPAN?"},
		{"KUBERNETES_RATELIMIT =400", "KUBERNETES_RATELIMIT ", "", "white space around the name); did you mean KUBERNETES_RATELIMIT?"},
		{"KUBERNETES_RATELIMIT_TIMESPAN =day", "KUBERNETES_RATELIMIT_TIMESPAN ", "", "white space around the name); did you mean KUBERNETES_RATELIMIT_TIMESPAN?"},
		{" KUBERNETES_RATELIMIT_OWNER=ops", " KUBERNETES_RATELIMIT_OWNER", "", "did you mean KUBERNETES_RATELIMIT_OWNER?"},
		{"KUBERNETES_RATELIMT=400", "KUBERNETES_RATELIMT", "", "did you mean KUBERNETES_RATELIMIT?"},
		{"KUBRENETES_RATELIMIT_STORE=redis", "KUBRENETES_RATELIMIT_STORE", "", "did you mean KUBERNETES_RATELIMIT_STORE?"},
		{"KUBERNETES_RATELİMİT=400", "KUBERNETES_RATELİMİT", "", "did you mean KUBERNETES_RATELIMIT?"},
		{"KUBERNETES_RATE_LIMIT_MAXWAIT=2s", "KUBERNETES_RATE_LIMIT_MAXWAIT", "", "did you mean KUBERNETES_RATELIMIT_MAX_WAIT?"},
		{"KUBERNETES_RATELIMITS_REDIS_URL=redis://:hunter2@r", "KUBERNETES_RATELIMITS_REDIS_URL", "", "did you mean KUBERNETES_RATELIMIT_REDIS_URL?"},
		{"KUBERNETES_RATE_LIMIT_COLOUR=blue", "KUBERNETES_RATE_LIMIT_COLOUR", "", "not a known variable"},
		// Service links only with the values Kubernetes injects.
		{"KUBERNETES_RATELIMIT_REDIS_SERVICE_PORT=hunter2", "KUBERNETES_RATELIMIT_REDIS_SERVICE_PORT", "", "not of that form"},
		{"KUBERNETES_RATELIMIT_REDIS_SERVICE_PORT=0", "KUBERNETES_RATELIMIT_REDIS_SERVICE_PORT", "", "not of that form"},
		{"KUBERNETES_RATELIMIT_REDIS_SERVICE_PORT=65536", "KUBERNETES_RATELIMIT_REDIS_SERVICE_PORT", "", "not of that form"},
		{"KUBERNETES_RATELIMIT_REDIS_SERVICE_PORT=06379", "KUBERNETES_RATELIMIT_REDIS_SERVICE_PORT", "", "not of that form"},
		{"KUBERNETES_RATELIMIT_REDIS_SERVICE_PORT_REDIS=hunter2", "KUBERNETES_RATELIMIT_REDIS_SERVICE_PORT_REDIS", "", "not of that form"},
		{"KUBERNETES_RATELIMIT_REDIS_SERVICE_HOST=redis.example", "KUBERNETES_RATELIMIT_REDIS_SERVICE_HOST", "", "not of that form"},
		{"KUBERNETES_RATELIMIT_REDIS_PORT=redis://:hunter2@10.0.0.1:6379", "KUBERNETES_RATELIMIT_REDIS_PORT", "", "not of that form"},
		{"KUBERNETES_RATELIMIT_REDIS_PORT=tcp://redis:6379", "KUBERNETES_RATELIMIT_REDIS_PORT", "", "not of that form"},
		{"KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP=tcp://10.0.0.1:6380", "KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP", "", "not of that form"},
		{"KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP=udp://10.0.0.1:6379", "KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP", "", "not of that form"},
		{"KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP_PROTO=udp", "KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP_PROTO", "", "not of that form"},
		{"KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP_PORT=6380", "KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP_PORT", "", "not of that form"},
		{"KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP_ADDR=hunter2", "KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP_ADDR", "", "not of that form"},
		{"KUBERNETES_RATELIMITS_REDIS_SERVICE_HOST=hunter2", "KUBERNETES_RATELIMITS_REDIS_SERVICE_HOST", "", "not of that form"},
		// Case is folded in ASCII only: U+0130 is not I.
		{"KUBERNETES_RATELIMIT_TIMESPAN=MİNUTE", EnvTimespan, "MİNUTE", "second, minute, hour, day"},
		{"KUBERNETES_RATELIMIT_ENABLED=ſure", EnvEnabled, "ſure", "true, false"},
		{"KUBERNETES_RATELIMIT_ADAPTIVE=Keep", EnvAdaptive, "Keep", "true, false"},
		// The same variable twice with different values.
		{"KUBERNETES_RATELIMIT=5\nKUBERNETES_RATELIMIT=6", EnvLimit, "", "more than once"},
		// Table order: the first bad row is reported.
		{"KUBERNETES_RATELIMIT_STORE_FAILURE=x\nKUBERNETES_RATELIMIT_JITTER=x\nKUBERNETES_RATELIMIT=x", EnvLimit, "x", "integer"},
		{"KUBERNETES_RATELIMIT_STORE_FAILURE=x\nKUBERNETES_RATELIMIT_JITTER=x", EnvJitter, "x", "milliseconds"},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			_, err := LoadConfig(strings.Split(tt.env, "\n"))
			require.Error(t, err)
			var ice *rlerrors.InvalidConfigurationError
			require.True(t, errors.As(err, &ice), "error %T is not an InvalidConfigurationError", err)
			assert.Equal(t, tt.key, ice.Key)
			assert.Equal(t, tt.value, ice.Value)
			assert.Contains(t, ice.Reason, tt.reasonHas)
			assert.Contains(t, err.Error(), tt.key)
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}
}

func TestLoadConfigErrorMessages(t *testing.T) {
	tests := []struct {
		env, want string
	}{
		{"KUBERNETES_RATELIMIT_TIMESPAN=week",
			`invalid configuration: KUBERNETES_RATELIMIT_TIMESPAN="week": one of second, minute, hour, day (any case)`},
		{"KUBERNETES_RATELIMIT_MAXWAIT=2s",
			`invalid configuration: KUBERNETES_RATELIMIT_MAXWAIT: not a known variable; did you mean KUBERNETES_RATELIMIT_MAX_WAIT?`},
		{"KUBERNETES_RATELIMIT_BURST=5",
			`invalid configuration: KUBERNETES_RATELIMIT_BURST="5": only accepted with KUBERNETES_RATELIMIT_STRATEGY=linear; KUBERNETES_RATELIMIT_STRATEGY=window already allows the whole limit at once`},
		{"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=http://:hunter2@redis:6379",
			`invalid configuration: KUBERNETES_RATELIMIT_REDIS_URL="http://:xxxxx@redis:6379": the scheme is not redis or rediss: a redis:// or rediss:// URL, such as rediss://:PASSWORD@redis.example:6379/0`},
	}
	for _, tt := range tests {
		_, err := LoadConfig(strings.Split(tt.env, "\n"))
		require.Error(t, err)
		assert.Equal(t, tt.want, err.Error())
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv(EnvLimit, "25")
	t.Setenv(EnvTimespan, "second")
	got, err := ConfigFromEnv()
	require.NoError(t, err)
	assert.Equal(t, 25, got.Limit)
	assert.Equal(t, time.Second, got.Timespan)

	t.Setenv(EnvTimespan, "fortnight")
	_, err = ConfigFromEnv()
	var ice *rlerrors.InvalidConfigurationError
	require.ErrorAs(t, err, &ice)
	assert.Equal(t, EnvTimespan, ice.Key)
}

func FuzzLoadConfig(f *testing.F) {
	seeds := []string{
		"",
		"KUBERNETES_RATELIMIT=400\nKUBERNETES_RATELIMIT_TIMESPAN=minute",
		"KUBERNETES_RATELIMIT_ENABLED=false\nKUBERNETES_RATELIMIT=x",
		"KUBERNETES_RATELIMIT_MAX_WAIT=1500ms\nKUBERNETES_RATELIMIT_JITTER=250",
		"KUBERNETES_RATELIMIT_STRATEGY=linear\nKUBERNETES_RATELIMIT_BURST=20\nKUBERNETES_RATELIMIT=10",
		"KUBERNETES_RATELIMIT_STORE=redis\nKUBERNETES_RATELIMIT_OWNER=ops\nKUBERNETES_RATELIMIT_REDIS_URL=rediss://:secret@r:6379/0",
		"KUBERNETES_RATELIMIT_STORE_FAILURE=open\nKUBERNETES_RATELIMIT_ADAPTIVE=no",
		"KUBERNETES_RATELIMIT_REDIS_PORT_6379_TCP_ADDR=1\nKUBERNETES_RATELIMIT_MAXWAIT=2",
		"KUBERNETES_RATELIMIT=20000\nKUBERNETES_RATELIMIT_STRATEGY=window",
		"KUBERNETES_RATELIMIT_CLASSES=write=8, read=4,list=2,event=1",
		"KUBERNETES_RATELIMIT_CLASSES=off",
		"KUBERNETES_RATELIMIT_CLASSES=event=100,EVENT=1",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, env string) {
		environ := strings.Split(env, "\n")
		cfg, err := LoadConfig(environ)
		if err == nil {
			if verr := cfg.Validate(); verr != nil {
				t.Fatalf("LoadConfig accepted a config that Validate rejects: %v", verr)
			}
			if back := loadDescribed(t, cfg); !assert.Equal(t, cfg, back) {
				t.Fatalf("what Describe prints does not load back as the same Config")
			}
			return
		}
		var ice *rlerrors.InvalidConfigurationError
		if !errors.As(err, &ice) {
			t.Fatalf("error %T is not an InvalidConfigurationError: %v", err, err)
		}
		named := isKnown(ice.Key)
		for _, kv := range environ {
			name, _, _ := strings.Cut(kv, "=")
			named = named || name == ice.Key
		}
		if !named || ice.Reason == "" {
			t.Fatalf("error does not name a variable and a reason: %#v", ice)
		}
		if ice.Key == EnvRedisURL {
			for _, kv := range environ {
				name, value, _ := strings.Cut(kv, "=")
				if name != EnvRedisURL {
					continue
				}
				u, perr := url.Parse(strings.TrimSpace(value))
				if perr != nil || u.User == nil {
					continue
				}
				if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Contains(ice.Value, pw) {
					t.Fatalf("the Redis password %q appears in the error value %q", pw, ice.Value)
				}
			}
		}
	})
}

func BenchmarkLoadConfig(b *testing.B) {
	environ := append(strings.Split(serviceLinks("KUBERNETES_RATELIMIT_REDIS"), "\n"),
		"PATH=/usr/bin", "HOME=/root",
		"KUBERNETES_RATELIMIT=200", "KUBERNETES_RATELIMIT_TIMESPAN=second", "KUBERNETES_RATELIMIT_MAX_WAIT=2s")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadConfig(environ); err != nil {
			b.Fatal(err)
		}
	}
}
