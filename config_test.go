package k8sratelimit

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	assert.True(t, c.Enabled)
	assert.Equal(t, 400, c.Limit)
	assert.Equal(t, time.Minute, c.Timespan)
	assert.True(t, c.Adaptive)
	assert.Nil(t, c.MaxWait)
	assert.Zero(t, c.Jitter)
	assert.Equal(t, "default", c.Owner)
	assert.Equal(t, StrategyWindow, c.Strategy)
	assert.Zero(t, c.Burst)
	assert.Equal(t, StoreMemory, c.Store)
	assert.Empty(t, c.RedisURL)
	assert.Equal(t, FailureLocal, c.StoreFailure)
	assert.False(t, c.ClassesOff)
	assert.Zero(t, c.ClassWeights)
	assert.NoError(t, c.Validate())
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"zero value is disabled, so valid", Config{}},
		{"disabled ignores nonsense", Config{Enabled: false, Limit: -1, Strategy: "x"}},
		{"any positive timespan", withDefaults(func(c *Config) { c.Timespan = 1500 * time.Millisecond })},
		{"a timespan of 366 days", withDefaults(func(c *Config) { c.Timespan = MaxTimespan })},
		{"a microsecond per request", withDefaults(func(c *Config) { c.Timespan = 400 * time.Microsecond })},
		{"a million a second", withDefaults(func(c *Config) { c.Strategy, c.Limit, c.Timespan = StrategyLinear, MaxLimit, time.Second })},
		{"max wait 0", withDefaults(func(c *Config) { c.MaxWait = new(time.Duration(0)) })},
		{"linear with burst 0 means 1", withDefaults(func(c *Config) { c.Strategy = StrategyLinear })},
		{"linear with burst = limit", withDefaults(func(c *Config) { c.Strategy, c.Burst = StrategyLinear, 400 })},
		{"linear above the window cap", withDefaults(func(c *Config) { c.Strategy, c.Limit = StrategyLinear, MaxLimit })},
		{"redis URL ignored with memory", withDefaults(func(c *Config) { c.RedisURL = NewSecretURL("::nonsense::") })},
		{"redis", withDefaults(func(c *Config) { c.Store, c.Owner, c.RedisURL = StoreRedis, "ops", NewSecretURL("redis://r:6379") })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.NoError(t, tt.cfg.Validate())
		})
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		key   string
		value string
	}{
		{"limit 0", withDefaults(func(c *Config) { c.Limit = 0 }), EnvLimit, "0"},
		{"limit over max", withDefaults(func(c *Config) { c.Strategy, c.Limit = StrategyLinear, MaxLimit+1 }), EnvLimit, "1000001"},
		{"window over its cap", withDefaults(func(c *Config) { c.Limit = MaxWindowLimit + 1 }), EnvLimit, "10001"},
		{"zero timespan", withDefaults(func(c *Config) { c.Timespan = 0 }), EnvTimespan, "0s"},
		{"negative timespan", withDefaults(func(c *Config) { c.Timespan = -time.Second }), EnvTimespan, "-1s"},
		{"timespan over 366 days", withDefaults(func(c *Config) { c.Timespan = MaxTimespan + 1 }), EnvTimespan, "8784h0m0.000000001s"},
		{"timespan of 57 years", withDefaults(func(c *Config) { c.Limit, c.Timespan = 1, 57*365*24*time.Hour }), EnvTimespan, "499320h0m0s"},
		{"largest duration", withDefaults(func(c *Config) { c.Timespan = math.MaxInt64 }), EnvTimespan, "2562047h47m16.854775807s"},
		{"under a microsecond per request", withDefaults(func(c *Config) { c.Timespan = 399 * time.Microsecond }), EnvTimespan, "399µs"},
		{"a nanosecond", withDefaults(func(c *Config) { c.Limit, c.Timespan = 1, time.Nanosecond }), EnvTimespan, "1ns"},
		{"negative max wait", withDefaults(func(c *Config) { c.MaxWait = new(time.Duration(-1)) }), EnvMaxWait, "-1ns"},
		{"max wait over 24h", withDefaults(func(c *Config) { c.MaxWait = new(25 * time.Hour) }), EnvMaxWait, "25h0m0s"},
		{"negative jitter", withDefaults(func(c *Config) { c.Jitter = -1 }), EnvJitter, "-1ns"},
		{"jitter over 60s", withDefaults(func(c *Config) { c.Jitter = time.Hour }), EnvJitter, "1h0m0s"},
		{"empty owner", withDefaults(func(c *Config) { c.Owner = "" }), EnvOwner, ""},
		{"owner with a colon", withDefaults(func(c *Config) { c.Owner = "a:b" }), EnvOwner, "a:b"},
		{"default owner with redis", withDefaults(func(c *Config) { c.Store, c.RedisURL = StoreRedis, NewSecretURL("redis://r") }), EnvOwner, "default"},
		{"empty strategy", withDefaults(func(c *Config) { c.Strategy = "" }), EnvStrategy, ""},
		{"burst with window", withDefaults(func(c *Config) { c.Burst = 1 }), EnvBurst, "1"},
		{"negative burst", withDefaults(func(c *Config) { c.Strategy, c.Burst = StrategyLinear, -1 }), EnvBurst, "-1"},
		{"burst over limit", withDefaults(func(c *Config) { c.Strategy, c.Burst = StrategyLinear, 401 }), EnvBurst, "401"},
		{"empty store", withDefaults(func(c *Config) { c.Store = "" }), EnvStore, ""},
		{"redis without URL", withDefaults(func(c *Config) { c.Store, c.Owner = StoreRedis, "ops" }), EnvRedisURL, ""},
		{"redis with a bad URL", withDefaults(func(c *Config) {
			c.Store, c.Owner, c.RedisURL = StoreRedis, "ops", NewSecretURL("redis://:hunter2@r/db")
		}), EnvRedisURL, "redis://:xxxxx@r/db"},
		{"empty failure policy", withDefaults(func(c *Config) { c.StoreFailure = "" }), EnvStoreFailure, ""},
		{"negative class weight", withDefaults(func(c *Config) { c.ClassWeights.Read = -1 }), EnvClasses, "write=8,read=-1,list=2,event=1"},
		{"class weight over max", withDefaults(func(c *Config) { c.ClassWeights.Event = 101 }), EnvClasses, "write=8,read=4,list=2,event=101"},
		{"class weights with the classes off", withDefaults(func(c *Config) { c.ClassesOff, c.ClassWeights.List = true, 3 }), EnvClasses, "write=8,read=4,list=3,event=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			var ice *rlerrors.InvalidConfigurationError
			require.ErrorAs(t, err, &ice)
			assert.Equal(t, tt.key, ice.Key)
			assert.Equal(t, tt.value, ice.Value)
			assert.NotEmpty(t, ice.Reason)
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}
}
