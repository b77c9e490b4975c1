package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy between clients and a server, for tests of a slow
// or flapping link: it listens on a free loopback port and forwards every
// connection to the server, can hold each reply back by a fixed delay
// (SetDelay), and can drop the link (Drop: close every connection and
// refuse new ones) until Restore. It is safe for concurrent use.
type Proxy struct {
	t      testing.TB
	addr   string // where it listens, kept across Drop and Restore
	target string

	mu    sync.Mutex
	ln    net.Listener // nil while dropped
	conns map[net.Conn]struct{}
	delay time.Duration
	wg    sync.WaitGroup
}

// StartProxy starts a proxy to the server at target (host:port) and stops
// it when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: listening: %v", err)
	}
	p := &Proxy{t: t, addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(p.close)
	return p
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// URL returns a redis:// URL of the server through the proxy.
func (p *Proxy) URL() string { return "redis://" + p.addr + "/0" }

// SetDelay makes every reply of the server reach its client d after the
// proxy read it, in order: a slow link one way. 0 forwards at once.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Drop closes every connection and refuses new ones (the port is closed)
// until Restore.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore accepts connections again, on the same port, after Drop.
func (p *Proxy) Restore() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy: listening again on %s: %v", p.addr, err)
	}
	p.ln = ln
	p.serve(ln)
}

func (p *Proxy) close() {
	p.Drop()
	p.wg.Wait()
}

// serve accepts connections on ln until it is closed.
func (p *Proxy) serve(ln net.Listener) {
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.forward(c) })
		}
	})
}

// forward joins client c to a new connection to the target until either
// ends or the link is dropped.
func (p *Proxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(c, s) {
		return
	}
	defer p.untrack(c, s)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { p.replies(c, s); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = s.Close()
	<-done
}

// track registers the connections c and s of one link, closing them and
// reporting false when the link was dropped meanwhile.
func (p *Proxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		_ = c.Close()
		_ = s.Close()
		return false
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	return true
}

func (p *Proxy) untrack(c, s net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	delete(p.conns, s)
}

// chunk is what the server sent, and when the proxy read it.
type chunk struct {
	b  []byte
	at time.Time
}

// replies copies what the server s sends to the client c, each chunk the
// delay in force after it was read, until either connection ends.
func (p *Proxy) replies(c, s net.Conn) {
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := s.Read(buf)
			if n > 0 {
				q <- chunk{b: buf[:n], at: time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range q {
		p.mu.Lock()
		d := p.delay
		p.mu.Unlock()
		time.Sleep(time.Until(ch.at.Add(d))) // the link's delay
		if _, err := c.Write(ch.b); err != nil {
			_ = s.Close()
			for range q { // let the reader end
			}
			return
		}
	}
}
