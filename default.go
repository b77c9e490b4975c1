package k8sratelimit

import (
	"sync"

	"k8s.io/client-go/rest"
)

// The process default limiter.
var (
	defaultMu  sync.Mutex
	defaultLim *Limiter
	defaultErr error
	defaultSet bool // built (or failed) once, or replaced by SetDefault
)

// Configure configures rc with the process default limiter (see Default):
// one line makes every client built from rc share its API server's
// budget. An invalid environment is returned as the error, every time.
func Configure(rc *rest.Config) error {
	l, err := Default()
	if err != nil {
		return err
	}
	return l.Configure(rc)
}

// Default returns the process default limiter, built once from the
// environment (ConfigFromEnv) on first use. When the environment is
// invalid, it returns the *errors.InvalidConfigurationError, every time.
func Default() (*Limiter, error) {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	if !defaultSet {
		defaultSet = true
		cfg, err := ConfigFromEnv()
		if err == nil {
			defaultLim, err = New(cfg)
		}
		defaultErr = err
	}
	return defaultLim, defaultErr
}

// SetDefault replaces the process default limiter; tests install a fake
// this way. SetDefault(nil) forgets it, so that the next Default builds it
// from the environment again. The replaced limiter is not closed.
func SetDefault(l *Limiter) {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	defaultLim, defaultErr, defaultSet = l, nil, l != nil
}
