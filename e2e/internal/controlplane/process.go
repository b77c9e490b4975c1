package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a process is given to exit after SIGTERM before it
// is killed.
const stopGrace = 10 * time.Second

// process is a child process whose output goes to a log file.
type process struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed when the process has exited
	err    error         // its exit status, once exited is closed
}

// startProcess starts bin with args, writing its output to
// <logDir>/<name>.log. The child is killed when the process that started
// it dies, so that a crashing test binary leaves nothing running.
func startProcess(name, bin string, args []string, logDir string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// Pid returns the process id.
func (p *process) Pid() int { return p.cmd.Process.Pid }

// exitedEarly returns an error describing the exit when the process has
// already exited, else nil.
func (p *process) exitedEarly() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.logTail(40))
	default:
		return nil
	}
}

// stop ends the process by its pid: SIGTERM, then SIGKILL after
// stopGrace. It is safe to call more than once.
func (p *process) stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stopping %s (pid %d): %w", p.name, p.Pid(), err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(stopGrace):
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s (pid %d): %w", p.name, p.Pid(), err)
	}
	<-p.exited
	return nil
}

// logTail returns the last n lines of the process's log.
func (p *process) logTail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
