// Package cluster names API servers and the budgets that belong to them.
//
// A budget is keyed by the API server a client talks to, never by its
// credentials, user agent or display name: two rest.Configs for the same
// server with different tokens share one budget, and two servers behind one
// proxy host with different path prefixes have separate budgets.
//
// The key of a budget is
//
//	k8s:<owner>:<apiserver>
//
// where <apiserver> is the server URL reduced by APIServer: the lower-cased
// host, the port only when it is not the scheme's default, and the path
// prefix without a trailing slash.
package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/client-go/rest"
)

// Key returns the budget key "k8s:<owner>:<apiserver>". It does not check
// its arguments: pass an owner that passed configuration and an apiserver
// returned by APIServer or APIServerFor.
func Key(owner, apiserver string) string {
	return "k8s:" + owner + ":" + apiserver
}

// APIServerFor returns the normalised API server of a client configuration,
// resolved the way client-go resolves it (rest.DefaultServerUrlFor: an empty
// Host is localhost, and a bare host:port is https only when the
// configuration has TLS settings).
func APIServerFor(rc *rest.Config) (string, error) {
	if rc == nil {
		return "", errors.New("cluster: nil rest.Config")
	}
	u, _, err := rest.DefaultServerUrlFor(rc)
	if err != nil {
		return "", fmt.Errorf("cluster: API server of rest.Config host %q: %s", redactUser(rc.Host), serverURLReason(err))
	}
	return APIServer(u.String())
}

// APIServer normalises an API server URL into the <apiserver> part of a
// budget key:
//
//   - the host is lower-cased, and an IPv6 host is kept in brackets;
//   - the port is dropped when it is the scheme's default (443 for https,
//     80 for http) and kept otherwise;
//   - the path prefix is kept without a trailing slash
//     (https://rancher.example.com/k8s/clusters/c-abc/ becomes
//     rancher.example.com/k8s/clusters/c-abc);
//   - user info, query and fragment are dropped;
//   - a bare host[:port][/path] is read as https.
//
// An https server is named without its scheme. A plain http server keeps
// "http://" in front, so that it is never mistaken for an https server on
// the same host and port, and so that APIServer(APIServer(x)) == APIServer(x)
// for every x.
//
// Empty input, a scheme other than http or https, a missing host and an
// invalid port are errors.
func APIServer(rawURL string) (string, error) {
	s := strings.TrimSpace(rawURL)
	if s == "" {
		return "", errors.New("cluster: empty API server URL")
	}
	u, err := parseServerURL(s)
	if err == nil && !utf8.ValidString(s) {
		err = errors.New("not valid UTF-8")
	}
	if err == nil && strings.ContainsFunc(s, unicode.IsSpace) {
		err = errors.New("contains white space")
	}
	if err != nil {
		return "", fmt.Errorf("cluster: API server URL %q: %w", redactUser(s), err)
	}
	host, err := normalHost(u)
	if err != nil {
		return "", fmt.Errorf("cluster: API server URL %q: %w", redactUser(s), err)
	}
	prefix := ""
	if u.Scheme == "http" {
		prefix = "http://"
	}
	return prefix + host + normalPath(u), nil
}

// parseServerURL parses s as an http or https URL, reading a bare
// host[:port][/path] as https (as client-go does for a host with TLS
// settings).
func parseServerURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		if hasScheme(s) {
			switch {
			case err != nil:
				return nil, unwrapURLError(err)
			case u.Scheme != "http" && u.Scheme != "https":
				return nil, fmt.Errorf("scheme %q is not http or https", u.Scheme)
			}
			return nil, errors.New("no host")
		}
		u, err = url.Parse("https://" + s)
		if err != nil {
			return nil, unwrapURLError(err)
		}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, errors.New("no host")
	}
	return u, nil
}

// hasScheme reports whether s starts with "scheme://" (RFC 3986: a letter,
// then letters, digits, "+", "-" or ".").
func hasScheme(s string) bool {
	i := strings.Index(s, "://")
	if i <= 0 {
		return false
	}
	for j, c := range s[:i] {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		other := '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
		if !letter && (j == 0 || !other) {
			return false
		}
	}
	return true
}

// normalHost returns the lower-cased host of u, IPv6 in brackets, with the
// port when it is not the scheme's default.
func normalHost(u *url.URL) (string, error) {
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", errors.New("no host")
	}
	// An IPv6 zone must stay escaped to read back as a URL.
	host = strings.Replace(host, "%", "%25", 1)
	p := u.Port()
	if p == "" {
		return bracketIPv6(host), nil
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 {
		return "", fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	if (u.Scheme == "https" && port == 443) || (u.Scheme == "http" && port == 80) {
		return bracketIPv6(host), nil
	}
	return net.JoinHostPort(host, strconv.FormatUint(port, 10)), nil
}

// bracketIPv6 puts an IPv6 host in brackets, as it is written before a port
// or a path.
func bracketIPv6(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// normalPath returns the escaped path prefix of u without trailing slashes.
// Escaping is canonical (it does not depend on how the input escaped it),
// and "@" is escaped too, so that a key never contains user-info syntax.
func normalPath(u *url.URL) string {
	p := strings.TrimRight(u.Path, "/")
	if p == "" {
		return ""
	}
	escaped := (&url.URL{Path: p}).EscapedPath()
	return strings.ReplaceAll(escaped, "@", "%40")
}

// unwrapURLError drops the *url.Error wrapper, which repeats the input that
// the caller's message already names.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// serverURLReason returns what rest.DefaultServerUrlFor says is wrong
// with a host, without the host it quotes: the caller names the host once,
// redacted, where client-go's quote would repeat it with its password.
func serverURLReason(err error) string {
	msg := unwrapURLError(err).Error()
	msg, _, _ = strings.Cut(msg, `: "`)
	return msg
}

// redactUser removes the user info of a URL-like string for use in error
// messages, so that no password is ever printed.
func redactUser(s string) string {
	rest := s
	scheme := ""
	if i := strings.Index(s, "://"); i >= 0 {
		scheme, rest = s[:i+3], s[i+3:]
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		return scheme + "xxxxx@" + rest[at+1:]
	}
	return s
}
