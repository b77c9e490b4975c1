package errors

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestReadable(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{time.Nanosecond, "1ms"},
		{1400 * time.Microsecond, "1ms"},
		{997920626 * time.Nanosecond, "998ms"},
		{999600 * time.Microsecond, "1s"},
		{time.Second, "1s"},
		{1049 * time.Millisecond, "1s"},
		{2500 * time.Millisecond, "2.5s"},
		{59940 * time.Millisecond, "59.9s"},
		{59960 * time.Millisecond, "1m"},
		{90 * time.Second, "1m30s"},
		{150*time.Second + 400*time.Millisecond, "2m30s"},
		{2 * time.Minute, "2m"},
		{time.Hour, "1h"},
		{time.Hour + 5*time.Second, "1h0m5s"},
		{time.Hour + 2*time.Minute, "1h2m"},
		{25 * time.Hour, "25h"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, readable(tt.d), "%v", tt.d)
	}
}

func TestAPIServerOf(t *testing.T) {
	tests := []struct{ key, want string }{
		{"k8s:ops:api.example.com", "api.example.com"},
		{"k8s:ops:http://localhost:8080", "http://localhost:8080"},
		{"k8s:ops:[2001:db8::1]:6443", "[2001:db8::1]:6443"},
		{"", ""},
		{"other", ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, apiServerOf(tt.key), tt.key)
	}
}
