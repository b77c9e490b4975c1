package redisstore

import (
	"context"
	"errors"
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"k8s.io/klog/v2"
)

// What makes a store unusable, as its reports name it. Each tells the
// user what to fix.
const (
	causeUnreachable = "unreachable"           // no connection, or no answer in time
	causeAuth        = "authentication failed" // the URL's password (or user) is wrong
	causeScripting   = "scripting refused"     // EVAL and FUNCTION are disabled or not permitted
	causeOther       = "error"                 // anything else: see the error
)

// Cause returns what err, the error of a call to Redis, says about the
// server: "unreachable" (no connection, or no answer in time),
// "authentication failed" (a wrong password or user in the URL),
// "scripting refused" (the server disables EVAL and FUNCTION, or the user
// may not run them, as on some managed Redis offerings) or "error". It is
// for messages; the store's errors stay matchable with errors.Is and
// errors.As.
func Cause(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	upper := strings.ToUpper(msg)
	switch {
	case strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") ||
		strings.Contains(upper, "INVALID PASSWORD") || strings.Contains(upper, "AUTH <PASSWORD> CALLED WITHOUT"):
		return causeAuth
	case refusesScripting(msg):
		return causeScripting
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, new(net.Error)) ||
		strings.Contains(msg, "connection refused") || strings.Contains(msg, "i/o timeout") || strings.HasPrefix(msg, "LOADING"):
		return causeUnreachable
	}
	return causeOther
}

// scriptingCommand matches the commands of scripts and functions in a
// server's refusal.
var scriptingCommand = regexp.MustCompile(`(?i)'?(evalsha|eval|fcall|function|script)'?`)

// refusesScripting reports whether msg is the server's refusal to run a
// script or a function: a command it does not know, one the user may not
// run, or scripting disabled.
func refusesScripting(msg string) bool {
	refusal := strings.HasPrefix(msg, "NOPERM") || strings.HasPrefix(msg, "ERR unknown command") ||
		strings.HasPrefix(msg, "ERR unknown subcommand") || strings.Contains(msg, "disabled")
	return refusal && scriptingCommand.MatchString(msg)
}

// redactedSecret replaces a secret in RedactURL.
const redactedSecret = "xxxxx"

// urlScheme is the syntax of a URL scheme (RFC 3986).
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// RedactURL returns a Redis URL fit for messages and logs: the password
// replaced by "xxxxx" (and a user name given alone, which in a Redis URL
// is often a password), the value of every query parameter replaced by
// "xxxxx" (a parameter without "=" as a whole) and any fragment too. The
// query is redacted as written, whether it parses or not, so a malformed
// query cannot slip through. A value that is not a URL is replaced as a
// whole (keeping a well-formed scheme), since it may be a password.
func RedactURL(s string) string {
	scheme, _, ok := strings.Cut(s, "://")
	if !ok || !urlScheme.MatchString(scheme) {
		return "<redacted>"
	}
	u, err := url.Parse(s)
	if err != nil {
		return scheme + "://<redacted>"
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			u.User = url.UserPassword(u.User.Username(), redactedSecret)
		} else {
			u.User = url.User(redactedSecret)
		}
	}
	if u.RawQuery != "" {
		u.RawQuery = redactQuery(u.RawQuery)
	}
	if u.Fragment != "" || u.RawFragment != "" {
		u.Fragment, u.RawFragment = redactedSecret, ""
	}
	return u.String()
}

// redactQuery replaces the value of every name=value pair of a raw query
// by "xxxxx", and a pair without "=" as a whole, splitting at both & and
// ; so that it never depends on the query being well formed.
func redactQuery(raw string) string {
	var b strings.Builder
	start := 0
	for i := 0; i <= len(raw); i++ {
		if i < len(raw) && raw[i] != '&' && raw[i] != ';' {
			continue
		}
		if pair := raw[start:i]; pair != "" {
			if name, _, ok := strings.Cut(pair, "="); ok {
				b.WriteString(name)
				b.WriteByte('=')
			}
			b.WriteString(redactedSecret)
		}
		if i < len(raw) {
			b.WriteByte(raw[i])
		}
		start = i + 1
	}
	return b.String()
}

// clientURL names the server of a client given to New, without its
// credentials: its address, or its Cluster's seed addresses.
func clientURL(client redis.UniversalClient) string {
	switch c := client.(type) {
	case *redis.Client:
		o := c.Options()
		scheme := "redis"
		if o.TLSConfig != nil {
			scheme = "rediss"
		}
		return scheme + "://" + o.Addr
	case *redis.ClusterClient:
		return "redis://" + strings.Join(c.Options().Addrs, ",")
	}
	return "redis"
}

// klogLogger returns klog's logger, the default of every store that is
// given none, as client-go logs.
func klogLogger() logr.Logger { return klog.Background() }
