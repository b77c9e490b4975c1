package errors

import (
	"fmt"
	"strings"
)

// InvalidConfigurationError reports a configuration value that is not
// accepted. It names the variable, the value that was given (secrets are
// redacted) and what is accepted.
type InvalidConfigurationError struct {
	// Key is the environment variable, for example
	// KUBERNETES_RATELIMIT_TIMESPAN. Configuration given in code is reported
	// under the variable that sets the same field.
	Key string
	// Value is the value that was given, with white space trimmed and
	// secrets redacted. It is empty when the variable is required but unset.
	Value string
	// Reason says what is accepted.
	Reason string
}

// Error returns "invalid configuration: KEY="VALUE": REASON", leaving out
// the value when there is none.
func (e *InvalidConfigurationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid configuration: ")
	b.WriteString(e.Key)
	if e.Value != "" {
		fmt.Fprintf(&b, "=%q", e.Value)
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}
