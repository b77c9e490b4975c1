// Package redistest starts a real redis-server for tests: on a free
// loopback port, with no persistence, stopped when the test ends.
//
// A test that needs Redis and cannot find redis-server fails with a message
// saying how to install it; it never passes silently.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Install says how to get redis-server on the machines this project
// supports.
const Install = "redis-server not found on PATH: install it (Debian/Ubuntu: apt-get install -y redis-server; macOS: brew install redis)"

// Server is one redis-server process.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string
	wrap []string // runs the server, see StartUnder

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start starts a redis-server and stops it when the test ends. Extra
// arguments are passed to it as they are, after the harness's own.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return StartUnder(t, nil, extra...)
}

// StartUnder is Start with the server run by the command wrap (a program
// and its arguments, before redis-server's own), such as valgrind. The
// server gets a minute to answer.
func StartUnder(t testing.TB, wrap []string, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(Install)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), port: freePort(t), args: extra, wrap: wrap}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// Pid returns the process ID of the server (of its wrapper, with
// StartUnder).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns a redis:// URL of the server.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Client returns a new client of the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill stops the server at once (SIGKILL), as a crash would. Its data is
// lost: nothing is persisted.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause stops the server without killing it (SIGSTOP): connections stay
// open and calls hang, as on an overloaded server. Resume undoes it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Restart starts a killed server again on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

func (s *Server) start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--daemonize", "no", "--protected-mode", "no",
	}, s.args...)
	cmd := exec.Command(s.bin, args...)
	ready := 10 * time.Second
	if len(s.wrap) > 0 {
		cmd = exec.Command(s.wrap[0], append(append(s.wrap[1:len(s.wrap):len(s.wrap)], s.bin), args...)...)
		ready = time.Minute
	}
	logf, err := os.Create(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		s.t.Fatalf("redis log: %v", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting %s: %v", s.bin, err)
	}
	s.cmd = cmd
	if err := s.waitReady(ready); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		s.cmd = nil
		s.t.Fatalf("redis-server on port %d did not start: %v\n%s", s.port, err, s.logTail())
	}
}

// waitReady polls PING until the server answers or d has passed.
func (s *Server) waitReady(d time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process
	}
}

func (s *Server) logTail() string {
	f, err := os.Open(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// String describes the server for test logs.
func (s *Server) String() string { return fmt.Sprintf("redis-server %s", s.Addr()) }

// StartCluster starts a Redis Cluster of n primaries (no replicas) on free
// loopback ports, splits the hash slots among them, waits until the
// cluster is ready and stops it when the test ends. It returns a cluster
// client.
func StartCluster(t testing.TB, n int) *redis.ClusterClient {
	t.Helper()
	nodes := make([]*Server, n)
	for i := range nodes {
		nodes[i] = Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
	}
	ctx := context.Background()
	const slots = 16384
	for i, s := range nodes {
		c := s.Client()
		if i > 0 {
			if err := c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(nodes[0].port)).Err(); err != nil {
				t.Fatalf("CLUSTER MEET: %v", err)
			}
		}
		from, to := i*slots/n, (i+1)*slots/n-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", from, to).Err(); err != nil {
			t.Fatalf("CLUSTER ADDSLOTSRANGE %d %d: %v", from, to, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range nodes {
		c := s.Client()
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Redis Cluster of %d nodes did not become ready: %v\n%s", n, err, info)
			}
			time.Sleep(50 * time.Millisecond) // polling the cluster's own convergence
		}
	}
	addrs := make([]string, n)
	for i, s := range nodes {
		addrs[i] = s.Addr()
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}
