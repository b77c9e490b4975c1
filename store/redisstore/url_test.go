package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClientFromURL(t *testing.T) {
	tests := []struct {
		url     string
		cluster bool
		tls     bool
		err     string
	}{
		{url: "redis://127.0.0.1:6379/0"},
		{url: "rediss://:secret@redis.example:6380/2", tls: true},
		{url: "redis://a:6379?addr=b:6379&addr=c:6379", cluster: true},
		{url: "rediss://a:6379?addr=b:6379", cluster: true, tls: true},
		{url: "http://redis:6379", err: "the scheme is not redis or rediss"},
		{url: "redis://redis:6379/notanumber", err: "redis URL"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c, err := clientFromURL(tt.url, 200*time.Millisecond)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				assert.NotContains(t, err.Error(), "secret")
				return
			}
			require.NoError(t, err)
			defer c.Close()
			assert.True(t, boundsCalls(c, 200*time.Millisecond), "every call is bounded by the timeout")
			switch cc := c.(type) {
			case *redis.ClusterClient:
				assert.True(t, tt.cluster)
				assert.Equal(t, tt.tls, cc.Options().TLSConfig != nil)
			case *redis.Client:
				assert.False(t, tt.cluster)
				assert.Equal(t, tt.tls, cc.Options().TLSConfig != nil)
			}
		})
	}
}

// A bad URL's error names the culprit and what to write instead, and
// never the secret (hunter2) around it.
func TestCheckURLSaysWhatToWrite(t *testing.T) {
	tests := []struct {
		url  string
		want []string
	}{
		{"redis://:hunter#2@redis:6379/0", []string{`holds "#"`, "%23", "redis://:PASS%23WORD@host:6379/0"}},
		{"redis://:hun/ter2@redis:6379/0", []string{`holds "/"`, "%2F"}},
		{"redis://:hun?ter2@redis:6379/0", []string{`holds "?"`, "%3F"}},
		{"redis://:hun%zzter2@redis", []string{"not a valid URL", "%25"}},
		{"redis://redis:99999/0", []string{"port 99999", "1 to 65535"}},
		{"redis://redis:0/0", []string{"port 0", "1 to 65535"}},
		{"redis://default:hunter2", []string{"port is not a number", "1 to 65535", "redis://:PASSWORD@host:6379/0"}},
		{"redis://redis:/0", []string{"port is empty", "1 to 65535"}},
		{"redis://redis:6379/0?password=hunter2", []string{`unexpected option "password"`, "redis://:PASSWORD@host:6379/0", "%23"}},
		{"redis://redis:6379/0?username=ops&password=hunter2", []string{"unexpected option", "USER:PASSWORD@host"}},
		{"redis://redis:6379/0?colour=hunter2", []string{`unexpected option "colour"`, "accepted are", "dial_timeout", "client_name"}},
		{"redis://redis:6379/0?hunter2", []string{"unexpected option (a name without a value, not shown)", "accepted are"}},
		{"redis://a:6379?addr=b:6379&colour=hunter2", []string{`unexpected option "colour"`, "route_randomly"}},
		{"redis://redis/0#hunter2", []string{"fragment", "%23"}},
		{"redis://redis?dial_timeout=hunter2", []string{"invalid dial_timeout duration"}},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := CheckURL(tt.url)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "hunter", "secrets stay out of the message")
			_, cerr := clientFromURL(tt.url, time.Second)
			require.Error(t, cerr)
			assert.Equal(t, "store: redis URL: "+err.Error(), cerr.Error(), "NewFromURL says the same")
		})
	}
	for _, ok := range []string{"redis://:hunter%232@redis:6379/0", "rediss://ops:hunter2@redis:6380/1?dial_timeout=1s", "rediss://r?skip_verify=true"} {
		assert.NoError(t, CheckURL(ok), ok)
	}
}

// FuzzClientFromURL checks that any URL gives a client or an error, never
// a panic; that CheckURL accepts exactly the URLs that give a client, and
// its message never holds the secret hunter2 unless the URL gives it as a
// query option's name; and that a client always bounds its calls.
func FuzzClientFromURL(f *testing.F) {
	for _, s := range []string{"redis://h:6379/0", "rediss://u:p@h/1?dial_timeout=1s", "redis://a?addr=b:1&addr=c:2", "redis://", "", "rediss://[::1]:6379",
		"redis://:hunter#2@h:6379/0", "redis://default:hunter2", "redis://h:99999", "redis://h/0?password=hunter2", "redis://h/0?hunter2",
		"redis://h/0?colour=hunter2", "redis://:hun%zzter2@h", "redis://a?addr=b:1&route=hunter2", "redis://h/0#hunter2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checked := CheckURL(raw)
		if checked != nil && strings.Contains(checked.Error(), "hunter2") && !strings.Contains(queryNames(raw), "hunter2") {
			t.Errorf("CheckURL(%q) repeats a secret: %v", raw, checked)
		}
		c, err := clientFromURL(raw, time.Second)
		if (checked == nil) != (err == nil) {
			t.Errorf("CheckURL(%q) = %v, but clientFromURL's error is %v", raw, checked, err)
		}
		if err != nil {
			return
		}
		defer c.Close()
		if !boundsCalls(c, time.Second) {
			t.Errorf("client from %q does not bound its calls", raw)
		}
	})
}

func TestInfoField(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n"
	assert.Equal(t, "7.0.15", infoField(info, "redis_version"))
	assert.Equal(t, "", infoField(info, "valkey_version"))
	assert.Equal(t, 7, major("7.0.15"))
	assert.Equal(t, 0, major("garbage"))
}

// boundsCalls reports whether client bounds each step of a call by
// timeout on its own: it honours context deadlines and its dial, pool, read and write
// timeouts are all positive and no longer than timeout.
func boundsCalls(client redis.UniversalClient, timeout time.Duration) bool {
	within := func(ds ...time.Duration) bool {
		for _, d := range ds {
			if d <= 0 || d > timeout {
				return false
			}
		}
		return true
	}
	switch c := client.(type) {
	case *redis.Client:
		o := c.Options()
		return o.ContextTimeoutEnabled && within(o.DialTimeout, o.PoolTimeout, o.ReadTimeout, o.WriteTimeout)
	case *redis.ClusterClient:
		o := c.Options()
		return o.ContextTimeoutEnabled && within(o.DialTimeout, o.PoolTimeout, o.ReadTimeout, o.WriteTimeout)
	}
	return false
}

// queryNames returns the names of the options a raw URL's query gives with
// "=", which are not secret.
func queryNames(raw string) string {
	_, q, _ := strings.Cut(raw, "?")
	var names []string
	for _, pair := range strings.Split(q, "&") {
		if name, _, ok := strings.Cut(pair, "="); ok {
			names = append(names, name)
		}
	}
	return strings.Join(names, " ")
}
