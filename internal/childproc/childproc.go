// Package childproc runs a test binary's own code in child processes, so
// that tests can check what several processes sharing one budget do
// together.
//
// The parent re-executes its test binary with Start, naming a mode: an
// environment variable set to the child's name. The binary's TestMain calls
// Main for each mode first, which runs the child's function instead of the
// tests when the variable is set. The child prints its Report on standard
// output; the parent waits for it (Process.Wait, or Process.Stop for a
// child that runs until told to stop) and reads it back with Parse. Times
// in a report are Unix nanoseconds on the wall clock the processes share.
package childproc

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Process is a child process started by Start.
type Process struct {
	// Name is the child's name: the value of its mode variable.
	Name string

	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   strings.Builder // its standard output and error; read after it ends
}

// Start starts the test binary again as a child named name in mode: with
// the variable mode set to name, env added to this process's environment
// (a later value of a variable replaces an earlier one) and no tests run.
// Its standard input stays open until Stop; its standard output and error
// are collected for Output. The child is killed when the test ends, should
// it still run.
func Start(t testing.TB, mode, name string, env ...string) *Process {
	t.Helper()
	p := &Process{Name: name}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(append(os.Environ(), env...), mode+"="+name)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	var err error
	p.stdin, err = p.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
	return p
}

// Wait waits for the child to end and returns what it printed, failing t
// when it did not exit 0.
func (p *Process) Wait(t testing.TB) string {
	t.Helper()
	require.NoError(t, p.cmd.Wait(), "child %s: %s", p.Name, p.out.String())
	return p.out.String()
}

// Stop tells the child to stop by closing its standard input (see
// Stopped), waits for it to end and returns what it printed. A child that
// has not ended within d is made to print its goroutines (SIGQUIT) and
// fails t with them: a hang is what such a test looks for.
func (p *Process) Stop(t testing.TB, d time.Duration) string {
	t.Helper()
	require.NoError(t, p.stdin.Close())
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, "child %s: %s", p.Name, p.out.String())
	case <-time.After(d):
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		<-exited
		t.Fatalf("child %s did not stop within %s of being told to; its output and goroutines:\n%s", p.Name, d, p.out.String())
	}
	return p.out.String()
}

// Kill ends the child at once (SIGKILL), as a crash would: it neither
// closes nor cleans up. It returns the error of sending the signal.
func (p *Process) Kill() error {
	err := p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	return err
}

// Output returns what the child printed; complete once it has ended.
func (p *Process) Output() string { return p.out.String() }

// RedisBudget is the configuration through which children share one
// budget, under owner, in the Redis server at url; the budget's limit and
// timespan come on top.
func RedisBudget(url, owner string) []string {
	return []string{
		"KUBERNETES_RATELIMIT_STORE=redis",
		"KUBERNETES_RATELIMIT_REDIS_URL=" + url,
		"KUBERNETES_RATELIMIT_OWNER=" + owner,
	}
}
