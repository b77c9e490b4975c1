package k8sratelimit

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	// mdLink is an inline link or image: [text](target) or ![alt](target),
	// with an optional "title".
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// mdHeading is an ATX heading.
	mdHeading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// mdCodeSpan is an inline code span.
	mdCodeSpan = regexp.MustCompile("`+[^`]*`+")
	// mdInlineLink is a link inside a heading, kept as its text.
	mdInlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// TestMarkdownLinksResolve checks every relative link of the repository's
// markdown (README.md, BENCHMARKS.md, docs/, examples/): the file it
// names exists, and its #anchor is a heading of that file, as GitHub
// makes anchors.
func TestMarkdownLinksResolve(t *testing.T) {
	files := markdownFiles(t)
	require.NotEmpty(t, files)
	anchors := map[string]map[string]bool{}
	for _, f := range files {
		anchors[f] = headingAnchors(readLines(t, f))
	}
	for _, f := range files {
		for _, l := range relativeLinks(readLines(t, f)) {
			path, frag, _ := strings.Cut(l.target, "#")
			target := f
			if path != "" {
				target = filepath.Clean(filepath.Join(filepath.Dir(f), filepath.FromSlash(path)))
				if _, err := os.Stat(target); err != nil {
					assert.Fail(t, "broken link", "%s:%d: %s: no file %s", f, l.line, l.target, target)
					continue
				}
			}
			if frag == "" {
				continue
			}
			a, ok := anchors[target]
			if !ok {
				a = headingAnchors(readLines(t, target))
			}
			assert.True(t, a[frag], "%s:%d: %s: no heading with anchor #%s in %s", f, l.line, l.target, frag, target)
		}
	}
}

func TestGitHubAnchor(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Configuration", "configuration"},
		{"API Priority and Fairness and seats", "api-priority-and-fairness-and-seats"},
		{"Sharing a budget across replicas (Redis)", "sharing-a-budget-across-replicas-redis"},
		{"The demo and the CLI", "the-demo-and-the-cli"},
		{"`kube-ratelimit status`: what it shows", "kube-ratelimit-status-what-it-shows"},
		{"Keys, TTLs & [links](x.md)", "keys-ttls--links"},
		{"snake_case stays", "snake_case-stays"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, githubAnchor(tt.heading), tt.heading)
	}
	got := headingAnchors([]string{"# A", "## A", "```", "# not a heading", "```", "## A"})
	assert.Equal(t, map[string]bool{"a": true, "a-1": true, "a-2": true}, got, "repeats are numbered, code is skipped")
}

// markdownFiles returns the markdown files users read, relative to the
// repository root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "BENCHMARKS.md"}
	for _, dir := range []string{"docs", "examples"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
				files = append(files, p)
			}
			return err
		})
		require.NoError(t, err)
	}
	return files
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Split(string(b), "\n")
}

// mdRef is a link found at a line.
type mdRef struct {
	target string
	line   int
}

// relativeLinks returns the links of lines outside fenced code and code
// spans that point into the repository: no scheme, no mailto.
func relativeLinks(lines []string) []mdRef {
	var refs []mdRef
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(mdCodeSpan.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			refs = append(refs, mdRef{target: target, line: i + 1})
		}
	}
	return refs
}

// headingAnchors returns the anchors GitHub gives the headings of lines,
// a repeated one numbered -1, -2, … in order.
func headingAnchors(lines []string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		m := mdHeading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		a := githubAnchor(m[1])
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// githubAnchor returns the anchor GitHub makes of a heading's text: links
// reduced to their text, lower case, every character but letters, digits,
// spaces, hyphens and underscores dropped, and spaces made hyphens.
func githubAnchor(heading string) string {
	heading = mdInlineLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
