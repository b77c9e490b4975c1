package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit"
)

func TestConfigCommand(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        []string
		wantStatus int
		wantOut    []string
		wantErr    []string
		notIn      string
	}{
		{
			name:       "defaults",
			args:       []string{"config"},
			wantStatus: 0,
			wantOut:    []string{`(?m)^KUBERNETES_RATELIMIT +400$`, `(?m)^KUBERNETES_RATELIMIT_TIMESPAN +minute$`, `(?m)^KUBERNETES_RATELIMIT_MAX_WAIT *$`, `(?m)^KUBERNETES_RATELIMIT_BURST *$`, `(?m)^KUBERNETES_RATELIMIT_REDIS_URL *$`, `(?m)^KUBERNETES_RATELIMIT_CONCURRENCY_MAX +100$`},
		},
		{
			name:       "concurrency ceiling set",
			args:       []string{"config"},
			env:        []string{"KUBERNETES_RATELIMIT_CONCURRENCY_MAX=40"},
			wantStatus: 0,
			wantOut:    []string{`(?m)^KUBERNETES_RATELIMIT_CONCURRENCY +auto$`, `(?m)^KUBERNETES_RATELIMIT_CONCURRENCY_MAX +40$`},
		},
		{
			name:       "fixed concurrency",
			args:       []string{"config"},
			env:        []string{"KUBERNETES_RATELIMIT_CONCURRENCY=8"},
			wantStatus: 0,
			wantOut:    []string{`(?m)^KUBERNETES_RATELIMIT_CONCURRENCY +8$`, `(?m)^KUBERNETES_RATELIMIT_CONCURRENCY_MAX *$`},
		},
		{
			name:       "redis password redacted",
			args:       []string{"config"},
			env:        []string{"KUBERNETES_RATELIMIT_STORE=redis", "KUBERNETES_RATELIMIT_OWNER=ops", "KUBERNETES_RATELIMIT_REDIS_URL=rediss://:hunter2@redis:6379/0"},
			wantStatus: 0,
			wantOut:    []string{`(?m)^KUBERNETES_RATELIMIT_REDIS_URL +rediss://:xxxxx@redis:6379/0$`},
			notIn:      "hunter2",
		},
		{
			name:       "invalid value",
			args:       []string{"config"},
			env:        []string{"KUBERNETES_RATELIMIT_TIMESPAN=week"},
			wantStatus: 2,
			wantErr:    []string{`KUBERNETES_RATELIMIT_TIMESPAN="week"`, "second, minute, hour, day"},
		},
		{
			name:       "unknown variable",
			args:       []string{"config"},
			env:        []string{"KUBERNETES_RATELIMIT_MAXWAIT=2s"},
			wantStatus: 2,
			wantErr:    []string{"KUBERNETES_RATELIMIT_MAXWAIT", "did you mean KUBERNETES_RATELIMIT_MAX_WAIT?"},
		},
		{
			name:       "disabled",
			args:       []string{"config"},
			env:        []string{"KUBERNETES_RATELIMIT_ENABLED=off", "KUBERNETES_RATELIMIT=junk"},
			wantStatus: 0,
			wantOut:    []string{`(?m)^KUBERNETES_RATELIMIT_ENABLED +false$`, "disabled"},
		},
		{name: "no command", wantStatus: 2, wantErr: []string{"Usage: kube-ratelimit <command> [flags]"}},
		{name: "unknown command", args: []string{"frobnicate"}, wantStatus: 2, wantErr: []string{`unknown command "frobnicate"`}},
		{name: "extra argument", args: []string{"config", "x"}, wantStatus: 2, wantErr: []string{`unexpected argument "x"`}},
		{name: "help", args: []string{"help"}, wantStatus: 0, wantOut: []string{`^Usage: kube-ratelimit <command> \[flags\]\n`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := run(tt.args, tt.env, &stdout, &stderr)
			assert.Equal(t, tt.wantStatus, status, "stderr: %s", stderr.String())
			for _, s := range tt.wantOut {
				assert.Regexp(t, s, stdout.String())
			}
			for _, s := range tt.wantErr {
				assert.Contains(t, stderr.String(), s)
			}
			if tt.notIn != "" {
				assert.NotContains(t, stdout.String()+stderr.String(), tt.notIn)
			}
		})
	}
}

// TestConfigCommandLoadsBack sets every value config prints back in the
// environment and checks that it loads as the same configuration. The
// Redis URL is printed redacted by design, so it is set as it was given.
func TestConfigCommandLoadsBack(t *testing.T) {
	redis := []string{"KUBERNETES_RATELIMIT_STORE=redis", "KUBERNETES_RATELIMIT_OWNER=ops", "KUBERNETES_RATELIMIT_REDIS_URL=rediss://:hunter2@redis:6379/0?dial_timeout=1s"}
	envs := [][]string{
		nil,
		{"KUBERNETES_RATELIMIT_ENABLED=off"},
		{"KUBERNETES_RATELIMIT_TIMESPAN=second", "KUBERNETES_RATELIMIT=50"},
		{"KUBERNETES_RATELIMIT_TIMESPAN=DAY", "KUBERNETES_RATELIMIT_MAX_WAIT=1500", "KUBERNETES_RATELIMIT_JITTER=60000"},
		{"KUBERNETES_RATELIMIT_TIMESPAN=hour", "KUBERNETES_RATELIMIT_MAX_WAIT=0", "KUBERNETES_RATELIMIT_ADAPTIVE=no"},
		{"KUBERNETES_RATELIMIT_STRATEGY=linear", "KUBERNETES_RATELIMIT=100000"},
		{"KUBERNETES_RATELIMIT_STRATEGY=linear", "KUBERNETES_RATELIMIT_BURST=7", "KUBERNETES_RATELIMIT_STORE_FAILURE=closed"},
		{"KUBERNETES_RATELIMIT_CONCURRENCY_MAX=100"},
		{"KUBERNETES_RATELIMIT_CONCURRENCY_MAX=7"},
		{"KUBERNETES_RATELIMIT_CONCURRENCY=off"},
		redis,
	}
	for _, env := range envs {
		t.Run(strings.Join(env, " "), func(t *testing.T) {
			want, err := k8sratelimit.LoadConfig(env)
			require.NoError(t, err)
			var stdout, stderr bytes.Buffer
			require.Equal(t, 0, run([]string{"config"}, env, &stdout, &stderr), stderr.String())
			assert.NotContains(t, stdout.String(), "hunter2")

			var printed []string
			for _, line := range strings.Split(stdout.String(), "\n") {
				name, value, _ := strings.Cut(line, " ")
				if !strings.HasPrefix(name, k8sratelimit.EnvLimit) {
					continue
				}
				value = strings.TrimSpace(value)
				if name == k8sratelimit.EnvRedisURL && value != "" {
					assert.Equal(t, want.RedisURL.String(), value)
					value = want.RedisURL.Reveal()
				}
				printed = append(printed, name+"="+value)
			}
			require.Len(t, printed, len(k8sratelimit.DefaultConfig().Describe()))
			got, err := k8sratelimit.LoadConfig(printed)
			require.NoError(t, err, "loading %q", printed)
			assert.Equal(t, want, got)
		})
	}
}
