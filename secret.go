package k8sratelimit

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// SecretURL is a URL that may hold a password, such as Config.RedisURL.
// However it is printed, logged or marshalled - fmt with any verb,
// encoding/json, encoding.TextMarshaler (and so encoding/xml and YAML
// encoders), log/slog - it shows only its redacted form (RedactRedisURL);
// Reveal returns the URL itself, for the code that connects with it.
//
// Make one with NewSecretURL:
//
//	cfg.RedisURL = k8sratelimit.NewSecretURL("rediss://:" + password + "@redis:6379/0")
//
// The zero SecretURL is the empty URL: unset. A SecretURL is immutable and
// safe to copy and to share between goroutines. Two SecretURLs made from
// the same text are equal by reflect.DeepEqual, not necessarily by ==.
type SecretURL struct {
	// v points to the text, so that printers that reach a SecretURL by
	// reflection without calling its methods (fmt, inside an unexported
	// field) print an address, never the text.
	v *string
}

// NewSecretURL returns s as a SecretURL. An empty s gives the zero
// SecretURL.
func NewSecretURL(s string) SecretURL {
	if s == "" {
		return SecretURL{}
	}
	return SecretURL{v: &s}
}

// Reveal returns the URL itself, password included. Pass it only to what
// connects with it, never to a log or a message.
func (s SecretURL) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

// IsZero reports whether the URL is empty (unset).
func (s SecretURL) IsZero() bool { return s.Reveal() == "" }

// String returns the redacted URL (see RedactRedisURL), or "" when unset.
func (s SecretURL) String() string {
	if s.IsZero() {
		return ""
	}
	return RedactRedisURL(s.Reveal())
}

// GoString returns a Go expression for the redacted URL, for the %#v verb.
func (s SecretURL) GoString() string {
	return "k8sratelimit.NewSecretURL(" + strconv.Quote(s.String()) + ")"
}

// Format prints the redacted URL with every verb: quoted with %q, as
// GoString with %#v, as it is otherwise.
func (s SecretURL) Format(f fmt.State, verb rune) {
	formatRedacted(f, verb, s.String(), s.GoString())
}

// MarshalText returns the redacted URL.
func (s SecretURL) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalJSON returns the redacted URL as a JSON string.
func (s SecretURL) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalText sets the URL to text, so that a Config can be decoded from
// JSON or YAML. Marshalling redacts, so a decoded Config that was marshalled
// holds the redacted URL, not the password.
func (s *SecretURL) UnmarshalText(text []byte) error {
	*s = NewSecretURL(string(text))
	return nil
}

// LogValue returns the redacted URL, for log/slog.
func (s SecretURL) LogValue() slog.Value { return slog.StringValue(s.String()) }

// formatRedacted writes str, already redacted, for verb: quoted with %q,
// goStr with %#v, str with every other verb (%d and %x included: fmt
// would otherwise walk the fields of the value).
func formatRedacted(f fmt.State, verb rune, str, goStr string) {
	switch {
	case verb == 'v' && f.Flag('#'):
		_, _ = fmt.Fprint(f, goStr)
	case verb == 'q':
		_, _ = fmt.Fprint(f, strconv.Quote(str))
	default:
		_, _ = fmt.Fprint(f, str)
	}
}

// RedactRedisURL returns a Redis URL fit for messages and logs: the
// password replaced by "xxxxx" (and a user name given alone, which in a
// Redis URL is often a password), the value of every query parameter
// replaced by "xxxxx" (a parameter without "=" as a whole) and any fragment
// too. The query is redacted as written, whether it parses or not, so a
// malformed query cannot slip through. A value that is not a URL is
// replaced as a whole (keeping a well-formed scheme), since it may be a
// password. It is redisstore.RedactURL, which the store's logs use.
func RedactRedisURL(s string) string { return redisstore.RedactURL(s) }
