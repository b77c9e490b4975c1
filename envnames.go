package k8sratelimit

import (
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ourVars returns the variables of environ named KUBERNETES_RATELIMIT or
// KUBERNETES_RATELIMIT_*, with their values trimmed, and the names of the
// other variables that are near misses of a known name (see nearMiss).
func ourVars(environ []string) (vars map[string]string, misses []string, err error) {
	vars = make(map[string]string)
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		value = strings.TrimSpace(value)
		if !isOurs(name) {
			if nearMiss(name) && !isServiceLink(name, value) {
				misses = append(misses, name)
			}
			continue
		}
		if prev, seen := vars[name]; seen && prev != value {
			return nil, nil, invalid(name, "", "given more than once, with different values")
		}
		vars[name] = value
	}
	return vars, misses, nil
}

func isOurs(name string) bool {
	return name == EnvLimit || strings.HasPrefix(name, EnvLimit+"_")
}

// misspeltPrefix matches the product's prefix spelt another way:
// KUBERNETES_RATE_LIMIT, KUBERNETES_RATELIMITS, KUBERNETES-RATELIMIT...
// It does not match a longer word (KUBERNETES_RATELIMITER_URL belongs to
// someone else).
var misspeltPrefix = regexp.MustCompile(`^KUBERNETES[_-]?RATE[_-]?LIMITS?([_-]|$)`)

// nearMiss reports whether name, not one of ours, was probably meant to
// be: it is one of ours in another case or with white space around it, it
// is one or two edits from a known name, or it starts with the prefix spelt
// another way. Case is folded in ASCII only.
func nearMiss(name string) bool {
	n := asciiUpper(strings.TrimSpace(name))
	if isOurs(n) || misspeltPrefix.MatchString(n) {
		return true
	}
	for _, known := range knownNames() {
		if withinEdits(n, known, 2) {
			return true
		}
	}
	return false
}

// checkNames reports the first (in sorted order) variable that is one of
// ours but neither known nor a service link, or a near miss. Its value is
// never shown: it may be a secret put under a wrong name.
func checkNames(vars map[string]string, misses []string) error {
	var bad []string
	for name, value := range vars {
		if !isKnown(name) && !isServiceLink(name, value) {
			bad = append(bad, name)
		}
	}
	bad = append(bad, misses...)
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	name := bad[0]
	reason := "not a known variable"
	switch n := strings.TrimSpace(name); {
	case n != name:
		reason += " (white space around the name)"
	case isOurs(asciiUpper(n)) && !isOurs(n):
		reason += " (names are upper case)"
	case looksLikeServiceLink(name):
		reason += " (named like a variable Kubernetes injects for a Service, but its value is not of that form)"
	}
	if s := suggest(name); s != "" && s != name {
		reason += "; did you mean " + s + "?"
	}
	return invalid(name, "", reason)
}

func isKnown(name string) bool { return slices.Contains(knownNames(), name) }

// knownNames returns every variable LoadConfig reads.
func knownNames() []string {
	names := make([]string, 0, len(envVars)+1)
	names = append(names, EnvEnabled)
	for _, ev := range envVars {
		names = append(names, ev.name)
	}
	return names
}

// suggest returns the known variable closest to name, when it is close,
// after folding case, trimming white space and writing the prefix as
// KUBERNETES_RATELIMIT.
func suggest(name string) string {
	n := asciiUpper(strings.TrimSpace(name))
	if m := misspeltPrefix.FindStringSubmatchIndex(n); m != nil {
		n = EnvLimit + n[m[2]:]
	}
	best, bestDist := "", 4
	for _, known := range knownNames() {
		if d := editDistance(n, known); d < bestDist {
			best, bestDist = known, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	d, _ := boundedEditDistance(a, b, -1)
	return d
}

// withinEdits reports whether a and b are at most bound edits apart,
// giving up as soon as they cannot be.
func withinEdits(a, b string, bound int) bool {
	_, ok := boundedEditDistance(a, b, bound)
	return ok
}

// boundedEditDistance returns the Levenshtein distance between the runes
// of a and b, or ok false as soon as it exceeds bound (when bound >= 0).
func boundedEditDistance(a, b string, bound int) (int, bool) {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		least := i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			least = min(least, cur[j])
		}
		if bound >= 0 && least > bound {
			return least, false
		}
		prev, cur = cur, prev
	}
	d := prev[len(rb)]
	return d, bound < 0 || d <= bound
}

// serviceLinkPrefix starts the variables Kubernetes injects for a Service
// named like kubernetes-ratelimit (or kubernetes-rate-limit...), followed
// by the rest of the Service's name, if any, and the kind.
var serviceLinkPrefix = regexp.MustCompile(`^KUBERNETES_?RATE_?LIMITS?_`)

// serviceLinkKind matches the kinds of service link variables: groups
// SERVICE_HOST; SERVICE_PORT (and SERVICE_PORT_<port name>); PORT, with
// the port number, protocol and PROTO, PORT or ADDR of the
// PORT_<number>_<protocol> forms.
var serviceLinkKind = regexp.MustCompile(`^(?:(SERVICE_HOST)|(SERVICE_PORT)(?:_[A-Z0-9_]+)?|(PORT)(?:_([0-9]+)_(TCP|UDP|SCTP)(?:_(PROTO|PORT|ADDR))?)?)$`)

var serviceName = regexp.MustCompile(`^[A-Z0-9_]+$`)

// isServiceLink reports whether name and value are a variable Kubernetes
// injects for a Service (docker links style): the name of that form and
// the value as Kubernetes writes it (an IP address, a port number,
// tcp://IP:PORT...). A Service name may make a name read several ways
// (a Service named redis-port-6379-tcp); any reading that fits will do.
func isServiceLink(name, value string) bool {
	return serviceLinkReadings(name, func(m []string) bool { return injectedValue(m, value) })
}

// looksLikeServiceLink reports whether name is of the form of a service
// link, whatever its value.
func looksLikeServiceLink(name string) bool {
	return serviceLinkReadings(name, func([]string) bool { return true })
}

// serviceLinkReadings calls ok with the submatches of serviceLinkKind for
// every way of reading name as a service link, until ok returns true.
func serviceLinkReadings(name string, ok func(m []string) bool) bool {
	loc := serviceLinkPrefix.FindStringIndex(name)
	if loc == nil {
		return false
	}
	rest := name[loc[1]:]
	for i := -1; i < len(rest); i++ {
		kind := rest
		if i >= 0 {
			if rest[i] != '_' || !serviceName.MatchString(rest[:i]) {
				continue
			}
			kind = rest[i+1:]
		}
		if m := serviceLinkKind.FindStringSubmatch(kind); m != nil && ok(m) {
			return true
		}
	}
	return false
}

// injectedValue reports whether value is what Kubernetes injects for the
// service link kind m (submatches of serviceLinkKind).
func injectedValue(m []string, value string) bool {
	switch {
	case m[1] != "": // SERVICE_HOST
		return isIP(value)
	case m[2] != "": // SERVICE_PORT, SERVICE_PORT_<name>
		return isPort(value)
	}
	port, proto := m[4], strings.ToLower(m[5])
	switch m[6] {
	case "PROTO":
		return value == proto
	case "PORT":
		return value == port && isPort(value)
	case "ADDR":
		return isIP(value)
	}
	scheme, hostPort, ok := strings.Cut(value, "://")
	if !ok || (proto != "" && scheme != proto) || (scheme != "tcp" && scheme != "udp" && scheme != "sctp") {
		return false
	}
	host, p, err := net.SplitHostPort(hostPort)
	return err == nil && isIP(host) && isPort(p) && (port == "" || p == port)
}

func isIP(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Zone() == ""
}

// isPort reports whether s is a port number, 1 to 65535, as Kubernetes
// writes it.
func isPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && allDigits(s) && n >= 1 && n <= 65535 && strconv.Itoa(n) == s
}

// asciiUpper upper-cases the ASCII letters of s only: strings.ToUpper
// and strings.EqualFold fold other letters too (U+0131 to I), which would
// let a name or value that is not ours pass for ours.
func asciiUpper(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}, s)
}

// asciiLower lower-cases the ASCII letters of s only (see asciiUpper):
// "MİNUTE", with U+0130, is not "minute".
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r - 'A' + 'a'
		}
		return r
	}, s)
}
