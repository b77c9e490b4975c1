package redistest

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// ResetStats zeroes the server's command statistics (CONFIG RESETSTAT).
func (s *Server) ResetStats(ctx context.Context) error {
	return s.Client().ConfigResetStat(ctx).Err()
}

// FunctionCalls returns how many functions (FCALL) the server has run
// since its statistics were last reset, and the time it took for them,
// from INFO commandstats.
func (s *Server) FunctionCalls(ctx context.Context) (calls int64, took time.Duration, err error) {
	info, err := s.Client().Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, fmt.Errorf("INFO commandstats: %w", err)
	}
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_fcall:"); ok {
			var usec int64
			if _, err := fmt.Sscanf(rest, "calls=%d,usec=%d,", &calls, &usec); err != nil {
				return 0, 0, fmt.Errorf("INFO commandstats: %q: %w", line, err)
			}
			return calls, time.Duration(usec) * time.Microsecond, nil
		}
	}
	return 0, 0, nil // none run
}

// CPU returns the CPU time, user and system, the server has used, from
// INFO cpu.
func (s *Server) CPU(ctx context.Context) (time.Duration, error) {
	info, err := s.Client().Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	var total float64
	for line := range strings.Lines(info) {
		for _, field := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), field); ok {
				var x float64
				if _, err := fmt.Sscanf(rest, "%g", &x); err != nil {
					return 0, fmt.Errorf("INFO cpu: %q: %w", line, err)
				}
				total += x
			}
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}
