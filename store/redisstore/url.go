package redisstore

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The query options go-redis accepts in a URL, as messages list them.
const (
	standaloneOptions = "client_name, conn_max_idle_time, conn_max_lifetime, conn_max_lifetime_jitter, db, " +
		"dial_timeout, max_active_conns, max_concurrent_dials, max_idle_conns, max_retries, max_retry_backoff, " +
		"min_idle_conns, min_retry_backoff, pipeline_pool_size, pipeline_read_buffer_size, " +
		"pipeline_write_buffer_size, pool_fifo, pool_size, pool_timeout, protocol, read_timeout, " +
		"skip_verify (rediss only), write_timeout"
	clusterOptions = "addr, client_name, conn_max_idle_time, conn_max_lifetime, conn_max_lifetime_jitter, " +
		"dial_timeout, dialer_retries, dialer_retry_timeout, failing_timeout_seconds, max_active_conns, " +
		"max_concurrent_dials, max_idle_conns, max_redirects, max_retries, max_retry_backoff, min_idle_conns, " +
		"min_retry_backoff, pipeline_pool_size, pipeline_read_buffer_size, pipeline_write_buffer_size, " +
		"pool_fifo, pool_size, pool_timeout, protocol, read_only, read_timeout, route_by_latency, " +
		"route_by_latency_tolerance, route_randomly, write_timeout"
)

// passwordForm is how a URL carries a password.
const passwordForm = "redis://:PASSWORD@host:6379/0"

// CheckURL reports what is wrong with a Redis URL as NewFromURL takes it,
// or returns nil. The error names the culprit and what to write instead,
// and never repeats the URL or a part of it that may be a secret (a
// password, a query value, a port that may be a misplaced password).
func CheckURL(rawURL string) error {
	if p := urlProblem(rawURL); p != "" {
		return errors.New(p)
	}
	return nil
}

// urlProblem is CheckURL's message, or "".
func urlProblem(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || strings.Contains(s, "#") {
		if p := userInfoProblem(s); p != "" {
			return p
		}
	}
	if err != nil {
		if p := hostPortProblem(authority(s)); p != "" {
			return p
		}
	}
	switch {
	case err != nil:
		return "not a valid URL (percent-encode reserved characters: % as %25, # as %23, / as %2F, ? as %3F, @ as %40)"
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return "the scheme is not redis or rediss"
	case u.Hostname() == "":
		return "no host: write redis://host:6379/0, with a password " + passwordForm
	case strings.Contains(s, "#"):
		return "a fragment (#) is not accepted; write # in a password as %23"
	}
	if p := hostPortProblem(u.Host); p != "" {
		return p
	}
	return queryProblem(s, u)
}

// userInfoProblem says which character of the user-info part (before the
// last @) must be percent-encoded, or returns "". It is asked only of a
// URL whose address does not parse, where the user info is a guess.
func userInfoProblem(s string) string {
	_, rest, ok := strings.Cut(s, "://")
	at := strings.LastIndex(rest, "@")
	if !ok || at < 0 {
		return ""
	}
	info := rest[:at]
	for _, c := range []struct{ char, code string }{{"#", "%23"}, {"/", "%2F"}, {"?", "%3F"}, {"@", "%40"}} {
		if strings.Contains(info, c.char) {
			return fmt.Sprintf("not a valid URL: the password (or user name) holds %q, which ends the address part of a URL: percent-encode it as %s, as in redis://:PASS%sWORD@host:6379/0",
				c.char, c.code, c.code)
		}
	}
	if _, err := url.PathUnescape(info); err != nil {
		return "not a valid URL: the password (or user name) holds a % that is not followed by two hex digits: write % as %25"
	}
	return ""
}

// authority returns the host[:port] of a URL that may not parse: what
// follows "://" up to a /, ? or #, after the last @ in it.
func authority(s string) string {
	_, rest, _ := strings.Cut(s, "://")
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	return rest
}

// hostPortProblem says what is wrong with the host[:port] of a URL, or
// returns "". A port is named only when it is a number: anything else
// may be a password written without its @host.
func hostPortProblem(host string) string {
	if !strings.HasPrefix(host, "[") && strings.Count(host, ":") > 1 {
		return "the host and port are not host:port (an IPv6 address goes in brackets)"
	}
	if strings.HasSuffix(host, ":") {
		return "the port is empty: write host:6379 with a port from 1 to 65535, or leave out the colon for 6379"
	}
	_, port, err := net.SplitHostPort(host)
	if err != nil {
		return ""
	}
	n, err := strconv.ParseUint(port, 10, 64)
	switch {
	case err != nil && strings.Trim(port, "0123456789") == "":
		return fmt.Sprintf("the port %s is not a number from 1 to 65535", port)
	case err != nil:
		return "the port is not a number from 1 to 65535 (not shown: it may be a password, which goes before the host: " + passwordForm + ")"
	case n == 0 || n > 65535:
		return fmt.Sprintf("the port %s is not a number from 1 to 65535", port)
	}
	return ""
}

// queryProblem says what is wrong with the query of u (from s), as
// go-redis reads it, or returns "".
func queryProblem(s string, u *url.URL) string {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "the query is not name=value pairs separated by & with valid %-escapes"
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		switch strings.ToLower(name) {
		case "password", "pass", "username", "user":
			return fmt.Sprintf("unexpected option %q: put the password in the user-info part, %s (or USER:PASSWORD@host), percent-encoding # as %%23, / as %%2F, ? as %%3F, @ as %%40, %% as %%25",
				name, passwordForm)
		}
	}
	parse, accepted := func() error { _, err := redis.ParseURL(s); return err }, standaloneOptions
	if q.Has("addr") {
		parse, accepted = func() error { _, err := redis.ParseClusterURL(s); return err }, clusterOptions
	}
	err = parse()
	if err == nil {
		return ""
	}
	reason := goRedisReason(err)
	if reason != "unexpected option" {
		return reason
	}
	return fmt.Sprintf("unexpected option %s: accepted are %s", unexpectedNames(err, u.RawQuery), accepted)
}

// unexpectedNames returns the names go-redis's "unexpected option" error
// lists, quoted, each one only when the query gives it with "=" (a name
// given alone may be a secret, as RedactRedisURL treats it).
func unexpectedNames(err error, rawQuery string) string {
	_, list, _ := strings.Cut(err.Error(), "unexpected option: ")
	withValue := map[string]bool{}
	for _, pair := range strings.Split(rawQuery, "&") {
		if name, _, ok := strings.Cut(pair, "="); ok {
			if n, err := url.QueryUnescape(name); err == nil {
				withValue[n] = true
			}
		}
	}
	var names []string
	for _, n := range strings.Split(list, ", ") {
		if withValue[n] {
			names = append(names, strconv.Quote(n))
		} else {
			names = append(names, "(a name without a value, not shown)")
		}
	}
	return strings.Join(names, ", ")
}

// goRedisReason returns what go-redis says is wrong with a URL without
// the value it quotes (`invalid dial_timeout duration: time: invalid
// duration "hunter2"` becomes "invalid dial_timeout duration"): a query
// value may be a password.
func goRedisReason(err error) string {
	msg := strings.TrimPrefix(err.Error(), "redis: ")
	msg, _, _ = strings.Cut(msg, ":")
	return msg
}
