package k8sratelimit

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// printed returns cfg as every printer shows it: fmt's verbs on the value,
// on a pointer and on containers that fmt walks by reflection (a map, a
// slice, structs with exported and unexported fields), encoding/json,
// encoding/xml and encoding.TextMarshaler, log/slog's JSON and text
// handlers, String, GoString, Describe and Validate's error.
func printed(t testing.TB, cfg Config) map[string]string {
	out := make(map[string]string)
	type exported struct{ C Config }
	type unexported struct{ c Config }
	type urlOnly struct{ u SecretURL }
	values := map[string]any{
		"value":      cfg,
		"pointer":    &cfg,
		"map":        map[string]any{"cfg": cfg, "url": cfg.RedisURL},
		"slice":      []any{cfg, &cfg, cfg.RedisURL},
		"exported":   exported{cfg},
		"unexported": unexported{cfg},
		"url":        cfg.RedisURL,
		"urlPointer": &cfg.RedisURL,
		"urlField":   urlOnly{cfg.RedisURL},
	}
	for name, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%q", "%x", "%X", "%10.3v"} {
			out[name+" "+verb] = fmt.Sprintf(verb, v)
		}
		out[name+" Sprint"] = fmt.Sprint(v)
		out[name+" Sprintln"] = fmt.Sprintln(v)

		b, err := json.Marshal(v)
		require.NoError(t, err, name)
		out[name+" json"] = string(b)
	}
	for name, v := range map[string]any{"value": cfg, "pointer": &cfg, "exported": exported{cfg}, "urlPointer": &cfg.RedisURL} {
		b, err := xml.Marshal(v)
		require.NoError(t, err, name)
		out[name+" xml"] = string(b)
	}
	text, err := cfg.RedisURL.MarshalText()
	require.NoError(t, err)
	out["MarshalText"] = string(text)

	var jsonLog, textLog bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&jsonLog, nil), slog.NewTextHandler(&textLog, nil)} {
		log := slog.New(h)
		log.Info("configured", "cfg", cfg, "ptr", &cfg, "url", cfg.RedisURL, slog.Any("any", cfg), slog.Group("g", "url", cfg.RedisURL))
		log.With("cfg", cfg).Info("with")
	}
	out["slog JSON"], out["slog text"] = jsonLog.String(), textLog.String()

	out["String"], out["GoString"] = cfg.String(), cfg.GoString()
	out["Describe"] = fmt.Sprint(cfg.Describe())
	if err := cfg.Validate(); err != nil {
		out["Validate"] = err.Error()
	}
	return out
}

// leaks returns the names of the printers whose output holds secret, as
// written or unescaped.
func leaks(outputs map[string]string, secret string) []string {
	forms := []string{secret}
	if s, err := url.QueryUnescape(secret); err == nil && s != secret {
		forms = append(forms, s)
	}
	var names []string
	for name, s := range outputs {
		for _, f := range forms {
			if strings.Contains(s, f) {
				names = append(names, name)
			}
		}
	}
	return names
}

func redisConfig(rawURL string) Config {
	return withDefaults(func(c *Config) {
		c.Store, c.Owner, c.RedisURL = StoreRedis, "ops", NewSecretURL(rawURL)
	})
}

func TestConfigNeverPrintsSecrets(t *testing.T) {
	urls := []string{
		"rediss://admin:hunter2@redis:6379/0",
		"rediss://:hunter2@redis:6379/0",
		"redis://hunter2@redis:6379/0",
		"redis://redis:6379/0?dial_timeout=1s;password=hunter2",
		"redis://redis:6379/0?;password=hunter2",
		"redis://redis:6379/0?password=hunter2%zz",
		"redis://redis:6379/0?auth=hunter2",
		"redis://redis:6379/0?pwd=hunter2",
		"redis://redis:6379/0?secret=hunter2",
		"redis://redis:6379/0?token=hunter2",
		"redis://redis:6379/0?hunter2",
		"redis://redis:6379/0#hunter2",
		"redis://:hun%zzter2@redis",
		"redis://:hunter2@redis:6379:1",
		"hunter2",
	}
	for _, u := range urls {
		t.Run(u, func(t *testing.T) {
			outputs := printed(t, redisConfig(u))
			assert.Empty(t, leaks(outputs, "hunter2"))
			for _, name := range []string{"value %v", "value %d", "pointer %+v", "value json", "slog JSON", "slog text"} {
				assert.Contains(t, outputs[name], "redis", "%s shows no URL at all: %s", name, outputs[name])
			}
		})
	}
}

func TestConfigPrintsRedactedURL(t *testing.T) {
	cfg := redisConfig("rediss://admin:hunter2@redis:6379/0?dial_timeout=1s")
	want := "rediss://admin:xxxxx@redis:6379/0?dial_timeout=xxxxx"
	outputs := printed(t, cfg)
	for _, name := range []string{"value %v", "value %d", "value %#v", "pointer %s", "map %v", "url %v", "url %x", "String", "Describe", "MarshalText"} {
		assert.Contains(t, outputs[name], want, name)
	}
	assert.Contains(t, outputs["value json"], `"RedisURL":"`+want+`"`)
	assert.Contains(t, outputs["slog JSON"], `"url":"`+want+`"`)
	assert.Contains(t, outputs["slog text"], "url="+want)
	assert.Equal(t, `k8sratelimit.NewSecretURL("`+want+`")`, fmt.Sprintf("%#v", cfg.RedisURL))
	assert.Equal(t, `"`+want+`"`, fmt.Sprintf("%q", cfg.RedisURL))
}

func TestSecretURL(t *testing.T) {
	var zero SecretURL
	assert.True(t, zero.IsZero())
	assert.Empty(t, zero.Reveal())
	assert.Empty(t, zero.String())
	assert.Equal(t, zero, NewSecretURL(""))

	s := NewSecretURL("redis://:hunter2@r:6379")
	assert.False(t, s.IsZero())
	assert.Equal(t, "redis://:hunter2@r:6379", s.Reveal())
	assert.Equal(t, "redis://:xxxxx@r:6379", s.String())
	assert.Equal(t, s, NewSecretURL("redis://:hunter2@r:6379"), "equal by reflect.DeepEqual")

	var cfg Config
	require.NoError(t, json.Unmarshal([]byte(`{"Store":"redis","RedisURL":"redis://:hunter2@r:6379"}`), &cfg))
	assert.Equal(t, "redis://:hunter2@r:6379", cfg.RedisURL.Reveal(), "decoding JSON sets the URL")
	b, err := json.Marshal(DefaultConfig())
	require.NoError(t, err)
	var back Config
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, DefaultConfig(), back, "a Config without a URL survives JSON")
}

func TestRedactRedisURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://redis:6379/0", "redis://redis:6379/0"},
		{"redis://:hunter2@redis:6379", "redis://:xxxxx@redis:6379"},
		{"rediss://user:hunter2@redis", "rediss://user:xxxxx@redis"},
		{"redis://hunter2@redis", "redis://xxxxx@redis"},
		{"redis://hunter2:@redis", "redis://xxxxx@redis"},
		{"redis://redis?password=hunter2", "redis://redis?password=xxxxx"},
		{"redis://redis?auth=hunter2&pwd=hunter2&secret=hunter2&token=hunter2", "redis://redis?auth=xxxxx&pwd=xxxxx&secret=xxxxx&token=xxxxx"},
		{"redis://redis:6379/0?dial_timeout=1s;password=hunter2", "redis://redis:6379/0?dial_timeout=xxxxx;password=xxxxx"},
		{"redis://redis:6379/0?;password=hunter2", "redis://redis:6379/0?;password=xxxxx"},
		{"redis://redis:6379/0?password=hunter2%zz", "redis://redis:6379/0?password=xxxxx"},
		{"redis://redis?hunter2&&a=b=c", "redis://redis?xxxxx&&a=xxxxx"},
		{"redis://redis/0#hunter2", "redis://redis/0#xxxxx"},
		{"redis://:hun%zzter2@redis", "redis://<redacted>"},
		{"hunter2 ://redis", "<redacted>"},
		{"hunter2", "<redacted>"},
		{"", "<redacted>"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, RedactRedisURL(tt.in), tt.in)
	}
}

// plantedURL builds a Redis URL, as written and possibly malformed, with
// password in its user info and value as the value of a query parameter,
// each wrapped in a marker that no fixed output holds. It returns the URL
// and the planted secrets, or ok false when the URL holds a secret more
// often than planted (the rest of the URL repeats it).
func plantedURL(user, password, host, query, value string) (raw string, secrets []string, ok bool) {
	const mark = "Zq7"
	password, value = mark+password+mark, mark+value+mark
	raw = "rediss://" + user + ":" + password + "@" + host + "/0?" + query + "=" + value + "&dial_timeout=1s"
	for _, s := range []string{password, value} {
		want := 1
		if s == password && password == value {
			want = 2
		}
		if strings.Count(raw, s) != want {
			return "", nil, false
		}
	}
	return raw, []string{password, value}, true
}

var fuzzURLSeeds = [][5]string{
	{"admin", "hunter2", "redis:6379", "token", "s3cret"},
	{"", "hunter2%zz", "redis", "password", "x;password=y"},
	{"u", "a@b", "[::1]:6380", "auth", "a&b#c"},
	{"hunter2", "", "redis:6379:1", "pwd", "%zz"},
	{"", "p/q", "r", ";secret", "v=w"},
}

func FuzzRedactRedisURL(f *testing.F) {
	for _, s := range fuzzURLSeeds {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Fuzz(func(t *testing.T, user, password, host, query, value string) {
		raw, secrets, ok := plantedURL(user, password, host, query, value)
		if !ok {
			t.Skip()
		}
		got := RedactRedisURL(raw)
		for _, s := range secrets {
			if names := leaks(map[string]string{"RedactRedisURL": got}, s); len(names) > 0 {
				t.Fatalf("RedactRedisURL(%q) = %q holds the secret %q", raw, got, s)
			}
		}
	})
}

func FuzzConfigPrinters(f *testing.F) {
	for _, s := range fuzzURLSeeds {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Fuzz(func(t *testing.T, user, password, host, query, value string) {
		raw, secrets, ok := plantedURL(user, password, host, query, value)
		if !ok {
			t.Skip()
		}
		outputs := printed(t, redisConfig(raw))
		environ := []string{EnvStore + "=redis", EnvOwner + "=ops", EnvRedisURL + "=" + raw}
		if cfg, err := LoadConfig(environ); err != nil {
			outputs["LoadConfig"] = err.Error()
		} else {
			for name, s := range printed(t, cfg) {
				outputs["loaded "+name] = s
			}
		}
		for _, s := range secrets {
			if names := leaks(outputs, s); len(names) > 0 {
				t.Fatalf("the secret %q planted in %q is printed by %v: %q", s, raw, names, outputs[names[0]])
			}
		}
	})
}
