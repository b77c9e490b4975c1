package k8sratelimit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// Strategy is how a budget spreads its requests over its timespan. It is
// store.Strategy, which the stores implement.
type Strategy = store.Strategy

const (
	// StrategyWindow allows at most Limit requests to be sent in any rolling
	// Timespan, exactly. It is the default.
	StrategyWindow = store.StrategyWindow
	// StrategyLinear paces requests evenly, one every Timespan/Limit, with a
	// burst allowance of Burst (GCRA).
	StrategyLinear = store.StrategyLinear
)

// StoreType is where budgets live.
type StoreType string

const (
	// StoreMemory keeps budgets in the process. It is the default.
	StoreMemory StoreType = "memory"
	// StoreRedis keeps budgets in Redis, shared by every process that names
	// the same Owner.
	StoreRedis StoreType = "redis"
)

// FailurePolicy is what happens to requests while a shared store cannot be
// reached. It is store.FailurePolicy, which the Redis store follows.
type FailurePolicy = store.FailurePolicy

const (
	// FailureLocal falls back to an in-process budget with this process's
	// share of the limit. It is the default.
	FailureLocal = store.FailureLocal
	// FailureOpen admits every request.
	FailureOpen = store.FailureOpen
	// FailureClosed fails every counted request.
	FailureClosed = store.FailureClosed
)

// Limits of the accepted values.
const (
	// MaxLimit is the largest accepted Limit.
	MaxLimit = 1_000_000
	// MaxWindowLimit is the largest Limit accepted with StrategyWindow, which
	// keeps one entry per request sent in the window.
	MaxWindowLimit = 10_000
	// MaxTimespan is the longest accepted Timespan: 366 days. Both stores
	// compute a slot as an instant plus up to a timespan, the Redis store
	// in microseconds of the server's clock held in Lua doubles (exact to
	// 2^53, about 285 years after 1970) and on the assumption that a
	// timespan is shorter than the time since 1970; the memory store in
	// int64 nanoseconds (about 292 years). A year keeps far from both.
	MaxTimespan = 366 * 24 * time.Hour
	// MinTimespanPerRequest is the shortest accepted Timespan per request
	// of Limit: the Redis store counts whole microseconds, so a shorter
	// interval between requests would not be kept.
	MinTimespanPerRequest = time.Microsecond
	// MaxMaxWait is the largest accepted MaxWait.
	MaxMaxWait = 24 * time.Hour
	// MaxJitter is the largest accepted Jitter.
	MaxJitter = 60 * time.Second
	// MaxOwnerLength is the longest accepted Owner.
	MaxOwnerLength = 63
	// DefaultOwner is the Owner of a budget when none is configured. It is
	// not accepted with StoreRedis, where the owner must be chosen.
	DefaultOwner = "default"
)

// Config is the configuration of a limiter. Start from DefaultConfig: the
// zero Config has Enabled false and so describes a disabled limiter.
//
// A Config is a plain value; it is safe to copy and to share between
// goroutines that do not modify it.
type Config struct {
	// Enabled turns the limiter on. When false, nothing else is validated
	// and clients are left exactly as they are. Default true.
	Enabled bool
	// Limit is the number of requests per Timespan, per API server: 1 to
	// MaxLimit, and at most MaxWindowLimit with StrategyWindow. Default 400.
	Limit int
	// Timespan is the period Limit applies to: second, minute, hour or
	// day from the environment; in code, any duration from Limit
	// microseconds (MinTimespanPerRequest per request) to MaxTimespan (366
	// days), the range both stores compute exactly. Default one minute.
	Timespan time.Duration
	// Adaptive makes a server's 429 (or 503 with Retry-After) cool the whole
	// budget down for as long as Retry-After says. Default true.
	Adaptive bool
	// MaxWait caps how long a request may wait for its slot: nil means no
	// cap, 0 means never wait, otherwise at most MaxMaxWait. Default nil.
	MaxWait *time.Duration
	// Jitter adds a uniform random 0 to Jitter to the slot of a request that
	// has to wait: 0 to MaxJitter. Default 0.
	Jitter time.Duration
	// Owner names who shares the budgets: 1 to 63 characters of A-Z a-z 0-9
	// . _ -. Default DefaultOwner, which StoreRedis does not accept.
	Owner string
	// Strategy is StrategyWindow (the default) or StrategyLinear.
	Strategy Strategy
	// Burst is the burst allowance of StrategyLinear: 0 for the default of 1,
	// or 1 to Limit. It must be 0 with StrategyWindow.
	Burst int
	// Store is StoreMemory (the default) or StoreRedis.
	Store StoreType
	// RedisURL is the redis:// or rediss:// URL of the Redis store. It is
	// required with StoreRedis and ignored with StoreMemory. It may hold a
	// password, so it is a SecretURL: set it with NewSecretURL, read it
	// with Reveal; printing or marshalling it shows it redacted.
	RedisURL SecretURL
	// StoreFailure is the policy while the store cannot be reached:
	// FailureLocal (the default), FailureOpen or FailureClosed.
	StoreFailure FailurePolicy
	// Concurrency limits each API server's requests in flight (its seats,
	// as API Priority and Fairness counts them): ConcurrencyAuto (0, the
	// default) learns the limit from the server's answers, ConcurrencyOff
	// (-1) sets none, and 1 to MaxSeats is a fixed number.
	Concurrency int
	// MaxConcurrency is the ceiling of ConcurrencyAuto: 0 for
	// DefaultMaxConcurrency, or 1 to MaxSeats. It must be 0 otherwise.
	MaxConcurrency int
	// ClassesOff puts every request of a budget in one line, first come,
	// first served, instead of sharing the budget among traffic classes
	// (see Class). Default false.
	ClassesOff bool
	// ClassWeights are the weights of the traffic classes: 0 to
	// MaxClassWeight each, 0 for the class's default. They must be zero
	// with ClassesOff.
	ClassWeights ClassWeights
}

// DefaultConfig returns the defaults: enabled, 400 requests per minute per
// API server with StrategyWindow, adaptive, no maximum wait, no jitter,
// owner "default", in memory, falling back to a local budget on store
// failure, a concurrency limit learned from the server's answers, and
// traffic classes with DefaultClassWeights.
func DefaultConfig() Config {
	return Config{
		Enabled:      true,
		Limit:        400,
		Timespan:     time.Minute,
		Adaptive:     true,
		Owner:        DefaultOwner,
		Strategy:     StrategyWindow,
		Store:        StoreMemory,
		StoreFailure: FailureLocal,
	}
}

// Validate reports the first field that is not accepted, checked in the
// order of the environment variables, as an
// *errors.InvalidConfigurationError naming the variable that sets the field.
// A disabled Config is always valid.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	checks := []func() error{
		c.checkLimit,
		c.checkTimespan,
		c.checkMaxWait,
		c.checkJitter,
		c.checkOwner,
		c.checkStrategy,
		c.checkBurst,
		c.checkStore,
		c.checkRedisURL,
		c.checkStoreFailure,
		c.checkConcurrency,
		c.checkConcurrencyMax,
		c.checkClasses,
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func invalid(key, value, reason string) error {
	return &rlerrors.InvalidConfigurationError{Key: key, Value: value, Reason: reason}
}

func (c Config) checkLimit() error {
	v := strconv.Itoa(c.Limit)
	if c.Limit < 1 || c.Limit > MaxLimit {
		return invalid(EnvLimit, v, reasonLimit)
	}
	if c.Strategy == StrategyWindow && c.Limit > MaxWindowLimit {
		return invalid(EnvLimit, v, fmt.Sprintf("at most %d with %s=%s, which keeps one entry per request in the window; use %s=%s for more",
			MaxWindowLimit, EnvStrategy, StrategyWindow, EnvStrategy, StrategyLinear))
	}
	return nil
}

func (c Config) checkTimespan() error {
	if c.Timespan <= 0 {
		return invalid(EnvTimespan, c.Timespan.String(), "must be a positive duration")
	}
	if c.Timespan > MaxTimespan {
		return invalid(EnvTimespan, c.Timespan.String(), fmt.Sprintf("at most %s (366 days): longer timespans overflow the stores' arithmetic", MaxTimespan))
	}
	if lo := time.Duration(c.Limit) * MinTimespanPerRequest; c.Timespan < lo {
		return invalid(EnvTimespan, c.Timespan.String(), fmt.Sprintf("at least %s with a limit of %d: the Redis store counts whole microseconds, so each request needs at least %s of the timespan", lo, c.Limit, MinTimespanPerRequest))
	}
	return nil
}

func (c Config) checkMaxWait() error {
	if c.MaxWait != nil && (*c.MaxWait < 0 || *c.MaxWait > MaxMaxWait) {
		return invalid(EnvMaxWait, c.MaxWait.String(), reasonMaxWait)
	}
	return nil
}

func (c Config) checkJitter() error {
	if c.Jitter < 0 || c.Jitter > MaxJitter {
		return invalid(EnvJitter, c.Jitter.String(), reasonJitter)
	}
	return nil
}

func (c Config) checkOwner() error {
	if !validOwner(c.Owner) {
		return invalid(EnvOwner, c.Owner, reasonOwner)
	}
	if c.Store == StoreRedis && c.Owner == DefaultOwner {
		return invalid(EnvOwner, c.Owner, reasonOwnerRedis)
	}
	return nil
}

func validOwner(s string) bool {
	if len(s) < 1 || len(s) > MaxOwnerLength {
		return false
	}
	for _, c := range []byte(s) {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

func (c Config) checkStrategy() error {
	switch c.Strategy {
	case StrategyWindow, StrategyLinear:
		return nil
	}
	return invalid(EnvStrategy, string(c.Strategy), reasonStrategy)
}

func (c Config) checkBurst() error {
	v := strconv.Itoa(c.Burst)
	if c.Strategy == StrategyWindow && c.Burst != 0 {
		return invalid(EnvBurst, v, fmt.Sprintf("only accepted with %s=%s; %s=%s already allows the whole limit at once",
			EnvStrategy, StrategyLinear, EnvStrategy, StrategyWindow))
	}
	if c.Burst < 0 || c.Burst > c.Limit {
		return invalid(EnvBurst, v, fmt.Sprintf("an integer from 1 to the limit (%d)", c.Limit))
	}
	return nil
}

func (c Config) checkStore() error {
	switch c.Store {
	case StoreMemory, StoreRedis:
		return nil
	}
	return invalid(EnvStore, string(c.Store), reasonStore)
}

func (c Config) checkRedisURL() error {
	if c.Store != StoreRedis {
		return nil // Ignored: switching to memory in an incident must not fail.
	}
	if strings.TrimSpace(c.RedisURL.Reveal()) == "" {
		return invalid(EnvRedisURL, "", fmt.Sprintf("required with %s=%s: %s", EnvStore, StoreRedis, reasonRedisURL))
	}
	if reason := redisURLProblem(c.RedisURL.Reveal()); reason != "" {
		return invalid(EnvRedisURL, c.RedisURL.String(), reason+": "+reasonRedisURL)
	}
	return nil
}

// redisURLProblem says what is wrong with a Redis URL, or returns "". It
// never repeats a part of the URL that may be a secret (see
// redisstore.CheckURL).
func redisURLProblem(s string) string {
	if err := redisstore.CheckURL(s); err != nil {
		return err.Error()
	}
	return ""
}

// redisErrorReason returns the reason of an error of redisstore.NewFromURL
// without its prefix.
func redisErrorReason(err error) string {
	return strings.TrimPrefix(err.Error(), "store: redis URL: ")
}

func (c Config) checkStoreFailure() error {
	switch c.StoreFailure {
	case FailureLocal, FailureOpen, FailureClosed:
		return nil
	}
	return invalid(EnvStoreFailure, string(c.StoreFailure), reasonStoreFailure)
}

// What each variable accepts, as error messages say it.
var (
	reasonLimit        = fmt.Sprintf("an integer from 1 to %d (at most %d with strategy window): requests per timespan, per API server", MaxLimit, MaxWindowLimit)
	reasonTimespan     = "one of second, minute, hour, day (any case)"
	reasonBool         = "one of true, false, 1, 0, yes, no, on, off (any case)"
	reasonMaxWait      = "milliseconds (2000) or a Go duration with a unit (2s, 1500ms, 1m), from 0 (never wait) to 24h"
	reasonJitter       = "milliseconds (250) or a Go duration with a unit (250ms, 1s), from 0 to 60s"
	reasonOwner        = fmt.Sprintf("1 to %d characters of A-Z a-z 0-9 . _ -", MaxOwnerLength)
	reasonOwnerRedis   = fmt.Sprintf("must be set with %s=%s, to a name other than %q: every deployment sharing the store needs its own owner, or budgets silently merge", EnvStore, StoreRedis, DefaultOwner)
	reasonStrategy     = "one of window, linear"
	reasonBurst        = fmt.Sprintf("an integer from 1 to the limit, only with %s=linear", EnvStrategy)
	reasonStore        = "one of memory, redis"
	reasonRedisURL     = "a redis:// or rediss:// URL, such as rediss://:PASSWORD@redis.example:6379/0"
	reasonStoreFailure = "one of local, open, closed"
)
