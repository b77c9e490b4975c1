package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
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
			wantOut:    []string{`(?m)^KUBERNETES_RATELIMIT +400$`, `(?m)^KUBERNETES_RATELIMIT_TIMESPAN +1m0s$`, `(?m)^KUBERNETES_RATELIMIT_MAX_WAIT +none$`, `(?m)^KUBERNETES_RATELIMIT_REDIS_URL +-$`},
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
		{name: "no command", wantStatus: 2, wantErr: []string{"usage"}},
		{name: "unknown command", args: []string{"frobnicate"}, wantStatus: 2, wantErr: []string{`unknown command "frobnicate"`}},
		{name: "extra argument", args: []string{"config", "x"}, wantStatus: 2, wantErr: []string{`unexpected argument "x"`}},
		{name: "help", args: []string{"help"}, wantStatus: 0, wantOut: []string{"usage"}},
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
