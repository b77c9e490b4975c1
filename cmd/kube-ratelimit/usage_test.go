package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every command's help reads the same way, on standard error, and -h is
// not an error.
func TestHelpHeaders(t *testing.T) {
	for _, cmd := range []string{"demo", "load", "config", "status"} {
		t.Run(cmd, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 0, run([]string{cmd, "-h"}, nil, &stdout, &stderr))
			assert.Empty(t, stdout.String())
			help := stderr.String()
			assert.True(t, strings.HasPrefix(help, "Usage: kube-ratelimit "+cmd+" [flags]\n\n"), help)
			if cmd != "config" {
				assert.Contains(t, help, "\nFlags:\n  -")
			}
		})
	}
}

// A bad flag is reported once, by the flag package, followed by the help.
func TestBadFlagReportedOnce(t *testing.T) {
	for _, cmd := range []string{"demo", "load", "config", "status"} {
		t.Run(cmd, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 2, run([]string{cmd, "-bogus"}, nil, &stdout, &stderr))
			assert.Equal(t, 1, strings.Count(stderr.String(), "-bogus"), stderr.String())
			assert.Contains(t, stderr.String(), "Usage: kube-ratelimit "+cmd+" [flags]")
		})
	}
}

// Errors found after parsing are reported as "kube-ratelimit <cmd>: ...".
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"config", "x"}, `kube-ratelimit config: unexpected argument "x"` + "\n"},
		{[]string{"status", "x"}, `kube-ratelimit status: unexpected argument "x"` + "\n"},
		{[]string{"status", "-interval", "0s"}, "kube-ratelimit status: -interval must be positive, not 0s\n"},
		{[]string{"demo", "-workers", "0"}, "kube-ratelimit demo: -workers must be at least 1, not 0\n"},
		{[]string{"load"}, "kube-ratelimit load: -kubeconfig is required\n"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(tt.args, nil, &stdout, &stderr), tt.args)
		assert.Equal(t, tt.want, stderr.String(), tt.args)
	}
}
