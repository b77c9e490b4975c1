package redisstore

import (
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
		{url: "http://redis:6379", err: "want redis:// or rediss://"},
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

// FuzzClientFromURL checks that any URL gives a client or an error, never
// a panic, and that a client always bounds its calls.
func FuzzClientFromURL(f *testing.F) {
	for _, s := range []string{"redis://h:6379/0", "rediss://u:p@h/1?dial_timeout=1s", "redis://a?addr=b:1&addr=c:2", "redis://", "", "rediss://[::1]:6379"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := clientFromURL(raw, time.Second)
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
