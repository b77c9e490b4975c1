package cluster

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

func TestAPIServer(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		// Host case, default ports.
		{"https://API.Example.COM", "api.example.com"},
		{"https://api.example.com:443", "api.example.com"},
		{"https://api.example.com:6443", "api.example.com:6443"},
		{"https://api.example.com:0443", "api.example.com"},
		{"HTTPS://api.example.com", "api.example.com"},
		{"http://api.example.com", "http://api.example.com"},
		{"http://api.example.com:80", "http://api.example.com"},
		{"http://localhost:8080", "http://localhost:8080"},
		{"http://api.example.com:443", "http://api.example.com:443"},
		{"https://api.example.com:80", "api.example.com:80"},
		{"https://api.example.com:", "api.example.com"},
		// Bare host[:port] is https.
		{"api.example.com", "api.example.com"},
		{"api.example.com:443", "api.example.com"},
		{"api.example.com:6443", "api.example.com:6443"},
		{"10.0.0.1:6443", "10.0.0.1:6443"},
		{"localhost", "localhost"},
		{"  https://api.example.com  ", "api.example.com"},
		// Path prefixes.
		{"https://rancher.example.com/k8s/clusters/c-abc", "rancher.example.com/k8s/clusters/c-abc"},
		{"https://rancher.example.com/k8s/clusters/c-abc/", "rancher.example.com/k8s/clusters/c-abc"},
		{"https://rancher.example.com/k8s/clusters/c-abc//", "rancher.example.com/k8s/clusters/c-abc"},
		{"https://Rancher.example.com/K8s/Clusters/C-abc", "rancher.example.com/K8s/Clusters/C-abc"},
		{"https://api.example.com/", "api.example.com"},
		{"rancher.example.com/k8s/clusters/c-abc", "rancher.example.com/k8s/clusters/c-abc"},
		{"https://h/a%20b", "h/a%20b"},
		{"https://h/a%3Fb", "h/a%3Fb"},
		{"https://h/a%3fb", "h/a%3Fb"},
		{"https://h/a@b", "h/a%40b"},
		// IPv6.
		{"https://[::1]:6443", "[::1]:6443"},
		{"https://[::1]", "[::1]"},
		{"https://[::1]:443", "[::1]"},
		{"https://[2001:DB8::1]:6443", "[2001:db8::1]:6443"},
		{"[::1]:6443", "[::1]:6443"},
		{"https://[fe80::1%25eth0]:6443", "[fe80::1%25eth0]:6443"},
		// User info, query and fragment are dropped.
		{"https://user:secret@api.example.com", "api.example.com"},
		{"https://api.example.com/prefix?timeout=5s#frag", "api.example.com/prefix"},
		{"https://api.example.com?x=1", "api.example.com"},
		// A "://" later in the input is not a scheme.
		{"https://0/://0", "0/://0"},
		{"0/://0", "0/://0"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := APIServer(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			again, err := APIServer(got)
			require.NoError(t, err)
			assert.Equal(t, got, again, "not idempotent")
		})
	}
}

func TestAPIServerRejects(t *testing.T) {
	tests := []struct {
		in, wantErr string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"ftp://api.example.com", `scheme "ftp"`},
		{"unix:///var/run/k8s.sock", `scheme "unix"`},
		{"https://", "no host"},
		{"https:///path", "no host"},
		{"https://:6443", "no host"},
		{"https://api.example.com:99999", "port"},
		{"https://api.example.com:0", "port"},
		{"https://api.example.com:http", "port"},
		{"https://api example.com", "invalid character"},
		{"https://api.example.com/a\u00a0b", "white space"},
		{"\xa0\u00a0#0", "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := APIServer(tt.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestAPIServerErrorHidesPassword(t *testing.T) {
	_, err := APIServer("ftp://admin:hunter2@api.example.com")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
	assert.Contains(t, err.Error(), "api.example.com")
}

func TestAPIServerFor(t *testing.T) {
	tests := []struct {
		name string
		rc   *rest.Config
		want string
	}{
		{"https URL", &rest.Config{Host: "https://API.example.com:443"}, "api.example.com"},
		{"bare host with CA is https", &rest.Config{Host: "api.example.com:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("x")}}, "api.example.com:6443"},
		{"bare host with insecure is https", &rest.Config{Host: "api.example.com", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, "api.example.com"},
		{"bare host without TLS is http, as client-go sends it", &rest.Config{Host: "localhost:8080"}, "http://localhost:8080"},
		{"empty host is localhost", &rest.Config{}, "http://localhost"},
		{"prefix", &rest.Config{Host: "https://rancher.example.com/k8s/clusters/c-abc/", APIPath: "/apis"}, "rancher.example.com/k8s/clusters/c-abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := APIServerFor(tt.rc)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Credentials, user agent, impersonation and the display name never enter
// the key.
func TestAPIServerForIgnoresIdentity(t *testing.T) {
	a := &rest.Config{Host: "https://api.example.com", BearerToken: "token-a", UserAgent: "a"}
	b := &rest.Config{
		Host:          "https://API.example.com:443/",
		Username:      "bob",
		Password:      "secret",
		UserAgent:     "b",
		Impersonate:   rest.ImpersonationConfig{UserName: "carol"},
		ContentConfig: rest.ContentConfig{ContentType: "application/json"},
	}
	ka, err := APIServerFor(a)
	require.NoError(t, err)
	kb, err := APIServerFor(b)
	require.NoError(t, err)
	assert.Equal(t, ka, kb)
}

func TestAPIServerForPrefixesAreSeparate(t *testing.T) {
	a, err := APIServerFor(&rest.Config{Host: "https://proxy.example.com/k8s/clusters/c-a"})
	require.NoError(t, err)
	b, err := APIServerFor(&rest.Config{Host: "https://proxy.example.com/k8s/clusters/c-b"})
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
}

func TestAPIServerForRejects(t *testing.T) {
	_, err := APIServerFor(nil)
	require.Error(t, err)

	_, err = APIServerFor(&rest.Config{Host: "https://admin:hunter2@api.example.com:99999"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
}

// An error names the host once, redacted: client-go's own message quotes
// it again, password included.
func TestAPIServerForErrorNamesTheHostOnce(t *testing.T) {
	tests := []struct{ host, want string }{
		{"https://admin:hunter2@api example.com:6443",
			`cluster: API server of rest.Config host "https://xxxxx@api example.com:6443": host must be a URL or a host:port pair`},
		{"api example.com",
			`cluster: API server of rest.Config host "api example.com": invalid character " " in host name`},
	}
	for _, tt := range tests {
		_, err := APIServerFor(&rest.Config{Host: tt.host})
		require.Error(t, err, tt.host)
		assert.Equal(t, tt.want, err.Error())
		assert.Equal(t, 1, strings.Count(err.Error(), "example.com"), err.Error())
	}
}

func TestKey(t *testing.T) {
	assert.Equal(t, "k8s:default:api.example.com:6443", Key("default", "api.example.com:6443"))
	assert.Equal(t, "k8s:team-a:rancher.example.com/k8s/clusters/c-abc", Key("team-a", "rancher.example.com/k8s/clusters/c-abc"))
}

func FuzzAPIServer(f *testing.F) {
	for _, s := range []string{
		"https://api.example.com", "api.example.com:6443", "http://h:443", "https://[::1]:6443",
		"https://u:p@h/k8s/clusters/c/?q#f", "https://[fe80::1%25eth0]", "h/a@b", "https://h/a%3fb",
		"ftp://x", "", "https://", "HTTPS://H:0443//",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := APIServer(in)
		if err != nil {
			return
		}
		if got == "" {
			t.Fatalf("APIServer(%q) = empty without an error", in)
		}
		if strings.ContainsAny(got, "@ ?#") {
			t.Fatalf("APIServer(%q) = %q contains user info, space, query or fragment syntax", in, got)
		}
		again, err := APIServer(got)
		if err != nil {
			t.Fatalf("APIServer(%q) = %q, which is rejected: %v", in, got, err)
		}
		if again != got {
			t.Fatalf("not idempotent: APIServer(%q) = %q, APIServer(%q) = %q", in, got, got, again)
		}
	})
}

func BenchmarkAPIServer(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := APIServer("https://Rancher.example.com:443/k8s/clusters/c-abc/"); err != nil {
			b.Fatal(err)
		}
	}
}
