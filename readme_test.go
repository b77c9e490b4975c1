package k8sratelimit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

// readmeRow is one row of README's configuration table.
type readmeRow struct{ name, def, accepted string }

// readmeConfigTable returns the rows of the table under the header
// "| variable | default | accepted |" in README.md.
func readmeConfigTable(t *testing.T) []readmeRow {
	t.Helper()
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	start := -1
	for i, l := range lines {
		if l == "| variable | default | accepted |" {
			start = i + 2 // after the |---| line
		}
	}
	require.Positive(t, start, "README.md has no configuration table")
	var rows []readmeRow
	for _, l := range lines[start:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		require.Len(t, cells, 3, "row %q", l)
		rows = append(rows, readmeRow{
			name:     strings.Trim(strings.TrimSpace(cells[0]), "`"),
			def:      strings.TrimSpace(cells[1]),
			accepted: strings.TrimSpace(cells[2]),
		})
	}
	return rows
}

var (
	codeSpan   = regexp.MustCompile("`([^`]*)`")
	withValue  = regexp.MustCompile("with (?:strategy )?`(window|linear)`")
	valueRange = regexp.MustCompile("(\\d+) … (\\d+[a-z]*)(?: with `(window|linear)`)?")
	upTo       = regexp.MustCompile(`up to (\d+) characters`)
)

// loadOne loads ctx and name=value; a problem with another variable than
// name (a store redis that needs an owner) does not count against value.
func loadOne(ctx []string, name, value string) (Config, error) {
	cfg, err := LoadConfig(append(append([]string(nil), ctx...), name+"="+value))
	var ice *rlerrors.InvalidConfigurationError
	if errors.As(err, &ice) && ice.Key != name {
		return cfg, nil
	}
	return cfg, err
}

// effective resolves the zero values that stand for a default.
func effective(c Config) Config {
	if c.Concurrency == ConcurrencyAuto && c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	return c
}

// TestReadmeConfigurationTable keeps README's configuration table in step
// with the code: the same variables in the order they are checked, the
// defaults LoadConfig applies, every listed choice accepted (in any case
// where the row says so), and every range's upper bound the one enforced.
func TestReadmeConfigurationTable(t *testing.T) {
	rows := readmeConfigTable(t)
	var names []string
	for _, r := range rows {
		names = append(names, r.name)
	}
	require.Equal(t, knownNames(), names, "README's table lists every variable LoadConfig reads, in its order")

	described := map[string]string{}
	for _, kv := range DefaultConfig().Describe() {
		described[kv[0]] = kv[1]
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var ctx []string
			if m := withValue.FindStringSubmatch(r.def); m != nil {
				ctx = []string{EnvStrategy + "=" + m[1]}
			}

			// The default: setting it loads what leaving it unset does.
			if strings.HasPrefix(r.def, "unset") {
				assert.Empty(t, described[r.name], "unset by default")
			} else {
				m := codeSpan.FindStringSubmatch(r.def)
				require.NotNil(t, m, "default %q: a value in backquotes, or unset", r.def)
				want, err := LoadConfig(ctx)
				require.NoError(t, err)
				got, err := LoadConfig(append(ctx, r.name+"="+m[1]))
				require.NoError(t, err, "the default %q", m[1])
				assert.Equal(t, effective(want), effective(got), "%s=%s is the default", r.name, m[1])
			}

			// A row that starts with a list of choices: each is accepted.
			if strings.HasPrefix(r.accepted, "`") {
				for _, v := range strings.Fields(codeSpan.FindStringSubmatch(r.accepted)[1]) {
					_, err := loadOne(nil, r.name, v)
					assert.NoError(t, err, "%s=%s", r.name, v)
					if strings.Contains(r.accepted, "any case") {
						_, err := loadOne(nil, r.name, strings.ToUpper(v))
						assert.NoError(t, err, "%s=%s", r.name, strings.ToUpper(v))
					}
				}
			}

			// Every range: its upper bound is accepted, the next value not.
			for _, m := range valueRange.FindAllStringSubmatch(r.accepted, -1) {
				ctx := ctx
				if m[3] != "" {
					ctx = []string{EnvStrategy + "=" + m[3]}
				}
				hi, above := m[2], ""
				if n, err := strconv.Atoi(hi); err == nil {
					above = strconv.Itoa(n + 1)
				} else {
					d, err := time.ParseDuration(hi)
					require.NoError(t, err, "range bound %q", hi)
					above = (d + time.Millisecond).String()
				}
				_, err := loadOne(ctx, r.name, hi)
				assert.NoError(t, err, "%s=%s %v", r.name, hi, ctx)
				_, err = loadOne(ctx, r.name, above)
				assert.Error(t, err, "%s=%s %v is out of range", r.name, above, ctx)
			}
			if m := upTo.FindStringSubmatch(r.accepted); m != nil {
				n, _ := strconv.Atoi(m[1])
				_, err := loadOne(nil, r.name, strings.Repeat("a", n))
				assert.NoError(t, err, "%s of %d characters", r.name, n)
				_, err = loadOne(nil, r.name, strings.Repeat("a", n+1))
				assert.Error(t, err, "%s of %d characters", r.name, n+1)
			}
		})
	}
}

// TestReadmeGoSnippetsCompile checks that every Go snippet in README.md is
// code that compiles and runs: each appears, line for line (indentation
// aside), in a Go file of the module, an example or a test.
func TestReadmeGoSnippetsCompile(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	snippets := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, snippets)

	var sources []string
	require.NoError(t, filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		src, err := os.ReadFile(path)
		sources = append(sources, path+"\n"+unindent(string(src)))
		return err
	}))
	for _, s := range snippets {
		snippet := unindent(s[1])
		found := ""
		for _, src := range sources {
			if strings.Contains(src, snippet) {
				found, _, _ = strings.Cut(src, "\n")
				break
			}
		}
		assert.NotEmpty(t, found, "README snippet not found in any Go file:\n%s", s[1])
	}
}

// unindent trims the white space around every line, so that a snippet
// taken from inside a function matches.
func unindent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}

// TestReadmeLinks checks that every relative link in README.md and docs/
// names a file of the repository.
func TestReadmeLinks(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	link := regexp.MustCompile(`\]\(([^)#]+)(?:#[^)]*)?\)`)
	for _, doc := range append([]string{"README.md", "BENCHMARKS.md"}, docs...) {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			if strings.Contains(m[1], "://") {
				continue
			}
			_, err := os.Stat(filepath.Join(filepath.Dir(doc), m[1]))
			assert.NoError(t, err, "%s links to %s", doc, m[1])
		}
	}
}
