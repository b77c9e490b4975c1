package k8sratelimit

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/k8sratelimit/k8sratelimit/limiter"
)

// The values of Config.Concurrency other than a fixed number of seats.
const (
	// ConcurrencyAuto learns each API server's concurrency limit from its
	// answers, up to MaxConcurrency. It is the default.
	ConcurrencyAuto = 0
	// ConcurrencyOff sets no concurrency limit: only the rate is metered.
	ConcurrencyOff = -1
)

// Limits of the accepted concurrency values.
const (
	// MaxSeats is the largest accepted fixed Concurrency and MaxConcurrency.
	MaxSeats = 10_000
	// DefaultMaxConcurrency is the ceiling of ConcurrencyAuto when
	// MaxConcurrency is 0.
	DefaultMaxConcurrency = limiter.DefaultMaxConcurrency
)

// The variables of the concurrency limit.
const (
	EnvConcurrency    = "KUBERNETES_RATELIMIT_CONCURRENCY"
	EnvConcurrencyMax = "KUBERNETES_RATELIMIT_CONCURRENCY_MAX"
)

var (
	reasonConcurrency    = fmt.Sprintf("auto (learn it from the server's answers), off, or a fixed number of requests in flight from 1 to %d", MaxSeats)
	reasonConcurrencyMax = fmt.Sprintf("an integer from 1 to %d: the ceiling of %s=auto, only with auto", MaxSeats, EnvConcurrency)
)

// concurrencyVars are the rows of the configuration table for the
// concurrency limit.
var concurrencyVars = []envVar{
	{EnvConcurrency, func(c *Config, v string) error {
		switch strings.ToLower(v) {
		case "auto":
			c.Concurrency = ConcurrencyAuto
			return nil
		case "off":
			c.Concurrency = ConcurrencyOff
			return nil
		}
		return parseInt(v, 1, MaxSeats, &c.Concurrency, EnvConcurrency, reasonConcurrency)
	}},
	{EnvConcurrencyMax, func(c *Config, v string) error {
		return parseInt(v, 1, MaxSeats, &c.MaxConcurrency, EnvConcurrencyMax, reasonConcurrencyMax)
	}},
}

func (c Config) checkConcurrency() error {
	if c.Concurrency < ConcurrencyOff || c.Concurrency > MaxSeats {
		return invalid(EnvConcurrency, strconv.Itoa(c.Concurrency), reasonConcurrency)
	}
	return nil
}

func (c Config) checkConcurrencyMax() error {
	v := strconv.Itoa(c.MaxConcurrency)
	if c.MaxConcurrency != 0 && c.Concurrency != ConcurrencyAuto {
		return invalid(EnvConcurrencyMax, v, fmt.Sprintf("only accepted with %s=auto", EnvConcurrency))
	}
	if c.MaxConcurrency < 0 || c.MaxConcurrency > MaxSeats {
		return invalid(EnvConcurrencyMax, v, reasonConcurrencyMax)
	}
	return nil
}

// concurrency returns the engine's concurrency limit of the configuration.
func (c Config) concurrency() limiter.Concurrency {
	switch {
	case c.Concurrency == ConcurrencyAuto:
		return limiter.Concurrency{Adaptive: true, Max: c.MaxConcurrency}
	case c.Concurrency > 0:
		return limiter.Concurrency{Fixed: c.Concurrency}
	default:
		return limiter.Concurrency{}
	}
}

// describeConcurrency returns the values the concurrency variables are
// printed with, each one its variable accepts: the ceiling of auto as the
// number in effect (DefaultMaxConcurrency when unset), and empty for a
// variable that does not apply.
func (c Config) describeConcurrency() [][2]string {
	switch {
	case c.Concurrency == ConcurrencyAuto:
		top := c.MaxConcurrency
		if top == 0 {
			top = DefaultMaxConcurrency
		}
		return [][2]string{{EnvConcurrency, "auto"}, {EnvConcurrencyMax, strconv.Itoa(top)}}
	case c.Concurrency > 0:
		return [][2]string{{EnvConcurrency, strconv.Itoa(c.Concurrency)}, {EnvConcurrencyMax, ""}}
	default:
		return [][2]string{{EnvConcurrency, "off"}, {EnvConcurrencyMax, ""}}
	}
}

// canonicalConcurrency writes a ceiling of auto that is the default as
// its zero value, so that CONCURRENCY_MAX=100, as Describe prints the
// default, loads as the same Config as no CONCURRENCY_MAX at all.
func (c *Config) canonicalConcurrency() {
	if c.Concurrency == ConcurrencyAuto && c.MaxConcurrency == DefaultMaxConcurrency {
		c.MaxConcurrency = 0
	}
}
