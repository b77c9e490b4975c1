package e2e_test

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on
// every Linux architecture.
const userHZ = 100

// cpuOf returns the CPU time, user and system, process pid has used.
func cpuOf(t *testing.T, pid int) time.Duration {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err, "the CPU time of process %d", pid)
	// The fields after the command, which is in parentheses and may hold
	// spaces, start with the third: utime and stime are the 14th and 15th.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	require.Greater(t, len(f), 12, "/proc/%d/stat: %s", pid, raw)
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err, "/proc/%d/stat: %s", pid, raw)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// cpuMeter measures the CPU time named processes use between its start
// and its report.
type cpuMeter struct {
	names  []string
	pids   []int
	before []time.Duration
}

func meterCPU(t *testing.T, names []string, pids ...int) *cpuMeter {
	t.Helper()
	m := &cpuMeter{names: names, pids: pids}
	for _, p := range pids {
		m.before = append(m.before, cpuOf(t, p))
	}
	return m
}

// report returns the CPU time each process used since the meter started,
// as "name 1.23s, …".
func (m *cpuMeter) report(t *testing.T) string {
	t.Helper()
	var parts []string
	for i, p := range m.pids {
		parts = append(parts, fmt.Sprintf("%s %.2fs", m.names[i], (cpuOf(t, p)-m.before[i]).Seconds()))
	}
	return strings.Join(parts, ", ")
}

// ownCPU returns the CPU time, user and system, this process has used.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisMeter counts the functions (FCALL) a redis-server runs between its
// start and its report, from its command statistics, zeroed at the start.
type redisMeter struct{ srv *redistest.Server }

func meterRedis(t *testing.T, srv *redistest.Server) redisMeter {
	t.Helper()
	require.NoError(t, srv.ResetStats(t.Context()))
	return redisMeter{srv}
}

// report returns the functions run, per request of sent, and the time
// Redis took for each, as "1.23 functions per request (4,567), 89 µs each".
func (m redisMeter) report(t *testing.T, sent int) string {
	t.Helper()
	calls, took, err := m.srv.FunctionCalls(t.Context())
	require.NoError(t, err)
	return fmt.Sprintf("%.2f functions per request (%d), %d µs each", float64(calls)/float64(max(sent, 1)), calls, took.Microseconds()/max(calls, 1))
}
