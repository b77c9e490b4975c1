package k8sratelimit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

// The environment variables LoadConfig reads, in the order it checks them.
const (
	EnvEnabled      = "KUBERNETES_RATELIMIT_ENABLED"
	EnvLimit        = "KUBERNETES_RATELIMIT"
	EnvTimespan     = "KUBERNETES_RATELIMIT_TIMESPAN"
	EnvAdaptive     = "KUBERNETES_RATELIMIT_ADAPTIVE"
	EnvMaxWait      = "KUBERNETES_RATELIMIT_MAX_WAIT"
	EnvJitter       = "KUBERNETES_RATELIMIT_JITTER"
	EnvOwner        = "KUBERNETES_RATELIMIT_OWNER"
	EnvStrategy     = "KUBERNETES_RATELIMIT_STRATEGY"
	EnvBurst        = "KUBERNETES_RATELIMIT_BURST"
	EnvStore        = "KUBERNETES_RATELIMIT_STORE"
	EnvRedisURL     = "KUBERNETES_RATELIMIT_REDIS_URL"
	EnvStoreFailure = "KUBERNETES_RATELIMIT_STORE_FAILURE"
)

// envVar is one row of the configuration table: a variable and how its
// value (trimmed, never empty) sets a field.
type envVar struct {
	name  string
	parse func(c *Config, value string) error
}

// envVars is the configuration table without EnvEnabled, which is read
// first, in the order the variables are checked.
var envVars = []envVar{
	{EnvLimit, func(c *Config, v string) error {
		return parseInt(v, 1, MaxLimit, &c.Limit, EnvLimit, reasonLimit)
	}},
	{EnvTimespan, func(c *Config, v string) error {
		d, ok := timespans[asciiLower(v)]
		if !ok {
			return invalid(EnvTimespan, v, reasonTimespan)
		}
		c.Timespan = d
		return nil
	}},
	{EnvAdaptive, func(c *Config, v string) error {
		return parseBool(v, &c.Adaptive, EnvAdaptive)
	}},
	{EnvMaxWait, func(c *Config, v string) error {
		d, ok := parseWait(v, MaxMaxWait)
		if !ok {
			return invalid(EnvMaxWait, v, reasonMaxWait)
		}
		c.MaxWait = &d
		return nil
	}},
	{EnvJitter, func(c *Config, v string) error {
		d, ok := parseWait(v, MaxJitter)
		if !ok {
			return invalid(EnvJitter, v, reasonJitter)
		}
		c.Jitter = d
		return nil
	}},
	{EnvOwner, func(c *Config, v string) error {
		c.Owner = v
		return c.checkOwner()
	}},
	{EnvStrategy, func(c *Config, v string) error {
		c.Strategy = Strategy(v)
		return c.checkStrategy()
	}},
	{EnvBurst, func(c *Config, v string) error {
		return parseInt(v, 1, MaxLimit, &c.Burst, EnvBurst, reasonBurst)
	}},
	{EnvStore, func(c *Config, v string) error {
		c.Store = StoreType(v)
		return c.checkStore()
	}},
	{EnvRedisURL, func(c *Config, v string) error {
		c.RedisURL = NewSecretURL(v) // Checked by Validate, and only with StoreRedis.
		return nil
	}},
	{EnvStoreFailure, func(c *Config, v string) error {
		c.StoreFailure = FailurePolicy(v)
		return c.checkStoreFailure()
	}},
	concurrencyVars[0],
	concurrencyVars[1],
	classesVar,
}

var timespans = map[string]time.Duration{
	"second": time.Second,
	"minute": time.Minute,
	"hour":   time.Hour,
	"day":    24 * time.Hour,
}

// ConfigFromEnv loads the configuration from the process environment:
// LoadConfig(os.Environ()).
func ConfigFromEnv() (Config, error) {
	return LoadConfig(os.Environ())
}

// LoadConfig loads the configuration from environ, a list of NAME=value
// entries as os.Environ returns it. Unset variables take the defaults of
// DefaultConfig; a value that is empty or only white space counts as unset,
// and surrounding white space is trimmed.
//
// Loading is strict. The first problem, checked in the order of the Env*
// constants, is returned as an *errors.InvalidConfigurationError naming the
// variable, the value (a Redis password is never shown) and what is
// accepted; nothing is silently replaced by a default. Any other variable
// named KUBERNETES_RATELIMIT_* is an error too, and so is a near miss of a
// known name (another case, white space around it, one or two characters
// off, or a prefix such as KUBERNETES_RATE_LIMIT or KUBERNETES_RATELIMITS),
// except the variables Kubernetes injects for a Service
// (KUBERNETES_RATELIMIT_REDIS_SERVICE_HOST=10.96.0.12 and the like), with
// values of the form Kubernetes gives them. A variable given twice with
// different values is an error.
//
// When KUBERNETES_RATELIMIT_ENABLED is false, nothing else is read or
// validated and the returned Config has Enabled false.
func LoadConfig(environ []string) (Config, error) {
	vars, misses, err := ourVars(environ)
	if err != nil {
		return Config{}, err
	}
	cfg := DefaultConfig()
	if v := vars[EnvEnabled]; v != "" {
		if err := parseBool(v, &cfg.Enabled, EnvEnabled); err != nil {
			return Config{}, err
		}
		if !cfg.Enabled {
			return cfg, nil
		}
	}
	if err := checkNames(vars, misses); err != nil {
		return Config{}, err
	}
	for _, ev := range envVars {
		if v := vars[ev.name]; v != "" {
			if err := ev.parse(&cfg, v); err != nil {
				return Config{}, err
			}
		}
	}
	if cfg.Store != StoreRedis {
		cfg.RedisURL = SecretURL{} // Ignored, and not kept: it may hold a password.
	}
	if cfg.Strategy == StrategyLinear && cfg.Burst == 0 {
		cfg.Burst = 1
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, asGiven(err, vars)
	}
	cfg.canonicalConcurrency()
	cfg.canonicalClasses()
	return cfg, nil
}

// asGiven makes an error from Validate show the value as the environment
// gave it (or none, when the variable was unset), not as the Config holds
// it. A Redis URL keeps its redacted form.
func asGiven(err error, vars map[string]string) error {
	e, ok := err.(*rlerrors.InvalidConfigurationError)
	if ok && e.Key != EnvRedisURL {
		e.Value = vars[e.Key]
	}
	return err
}

// parseInt sets *dst to v, a decimal integer from lo to hi.
func parseInt(v string, lo, hi int, dst *int, key, reason string) error {
	if !allDigits(v) {
		return invalid(key, v, reason)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return invalid(key, v, reason)
	}
	*dst = n
	return nil
}

// parseBool sets *dst to v, one of true false 1 0 yes no on off in any case.
func parseBool(v string, dst *bool, key string) error {
	switch asciiLower(v) {
	case "true", "1", "yes", "on":
		*dst = true
	case "false", "0", "no", "off":
		*dst = false
	default:
		return invalid(key, v, reasonBool)
	}
	return nil
}

// parseWait reads bare milliseconds (2000) or a Go duration with a unit
// (2s), from 0 to hi.
func parseWait(v string, hi time.Duration) (time.Duration, bool) {
	if allDigits(v) {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms > hi.Milliseconds() {
			return 0, false
		}
		return time.Duration(ms) * time.Millisecond, true
	}
	if strings.HasPrefix(v, "-") {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > hi {
		return 0, false
	}
	return d, true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Describe returns the effective settings as NAME, value pairs in the order
// of the configuration table, each written as its variable accepts it: the
// timespan as second, minute, hour or day, durations as Go durations, the
// ceiling of ConcurrencyAuto as the number in effect, and "" for what is
// unset and has no value of its own (MaxWait nil, Burst 0 with
// StrategyWindow, no Redis URL, MaxConcurrency without ConcurrencyAuto),
// since an empty value counts as unset. Loading what it returns gives
// the same Config, but for two things that no variable can say: the Redis
// URL, shown redacted, and a Timespan set in code that is not one of the
// four units, shown as a Go duration. It is what the config command prints.
func (c Config) Describe() [][2]string {
	maxWait := ""
	if c.MaxWait != nil {
		maxWait = c.MaxWait.String()
	}
	burst := ""
	if c.Burst != 0 || c.Strategy != StrategyWindow {
		burst = strconv.Itoa(c.Burst)
	}
	return append([][2]string{
		{EnvEnabled, strconv.FormatBool(c.Enabled)},
		{EnvLimit, strconv.Itoa(c.Limit)},
		{EnvTimespan, timespanName(c.Timespan)},
		{EnvAdaptive, strconv.FormatBool(c.Adaptive)},
		{EnvMaxWait, maxWait},
		{EnvJitter, c.Jitter.String()},
		{EnvOwner, c.Owner},
		{EnvStrategy, string(c.Strategy)},
		{EnvBurst, burst},
		{EnvStore, string(c.Store)},
		{EnvRedisURL, c.RedisURL.String()},
		{EnvStoreFailure, string(c.StoreFailure)},
	}, append(c.describeConcurrency(), [2]string{EnvClasses, c.describeClasses()})...)
}

// timespanName returns the name EnvTimespan accepts for d, or d as a Go
// duration when it has none.
func timespanName(d time.Duration) string {
	for name, span := range timespans {
		if span == d {
			return name
		}
	}
	return d.String()
}

// String returns the effective settings on one line, with the Redis URL
// redacted, so that logging a Config never leaks a password.
func (c Config) String() string {
	var b strings.Builder
	for i, kv := range c.Describe() {
		if i > 0 {
			b.WriteByte(' ')
		}
		name := "limit"
		if kv[0] != EnvLimit {
			name = strings.ToLower(strings.TrimPrefix(kv[0], EnvLimit+"_"))
		}
		fmt.Fprintf(&b, "%s=%s", name, kv[1])
	}
	return b.String()
}

// GoString is String for the %#v verb, which would otherwise print the
// fields.
func (c Config) GoString() string {
	return "k8sratelimit.Config{" + c.String() + "}"
}

// Format prints String with every verb (quoted with %q, GoString with
// %#v), so that no verb - %d and %x included - makes fmt walk the fields.
func (c Config) Format(f fmt.State, verb rune) {
	formatRedacted(f, verb, c.String(), c.GoString())
}
