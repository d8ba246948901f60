// Package admissiontest gives data-plane integration tests a client of the real Redis server named by
// TOLLGATE_TEST_REDIS_URL (default redis://127.0.0.1:6379/0) and a key prefix unique to the test; every
// key under the prefix is deleted when the test ends. The server is shared: tests never FLUSHDB. Without
// -short a missing server fails the test loudly; it never skips. For outages, Proxy cuts connections to
// that server, and StartServer runs a redis-server of the test's own that the test can freeze (SIGSTOP)
// and thaw.
package admissiontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// URL is the Redis server tests use.
func URL() string {
	if u := os.Getenv("TOLLGATE_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// Redis returns a connected client and a fresh key prefix ("test:<random>:").
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Redis; skipped in -short mode")
	}
	opts, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatalf("admissiontest: parse %s: %v", URL(), err)
	}
	opts.PoolSize = 64
	rdb := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("admissiontest: Redis at %s (set TOLLGATE_TEST_REDIS_URL): %v", URL(), err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, k := range Keys(t, rdb, prefix) {
			rdb.Del(ctx, k)
		}
		rdb.Close()
	})
	return rdb, prefix
}

// Keys lists every key under prefix.
func Keys(t testing.TB, rdb *redis.Client, prefix string) []string {
	t.Helper()
	var out []string
	iter := rdb.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("admissiontest: scan %s*: %v", prefix, err)
	}
	return out
}

// Proxy forwards loopback TCP connections to the test Redis server, so a test can stage a Redis outage:
// Down closes the listener and every connection, Up listens on the same address again.
type Proxy struct {
	t      testing.TB
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

// NewProxy starts a Proxy to the server of URL(); it is taken down when the test ends.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	opts, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatalf("admissiontest: parse %s: %v", URL(), err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, addr: ln.Addr().String(), target: opts.Addr, conns: map[net.Conn]bool{}}
	p.serve(ln)
	t.Cleanup(p.Down)
	return p
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.addr }

// URL is URL() with the proxy's address in place of the server's.
func (p *Proxy) URL() string {
	u, err := url.Parse(URL())
	if err != nil {
		p.t.Fatalf("admissiontest: parse %s: %v", URL(), err)
	}
	u.Host = p.addr
	return u.String()
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.ln != ln { // taken down meanwhile
				p.mu.Unlock()
				c.Close()
				u.Close()
				return
			}
			p.conns[c], p.conns[u] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
}

// Down refuses new connections and cuts the open ones.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// Up accepts connections again, on the same address.
func (p *Proxy) Up() {
	p.t.Helper()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("admissiontest: relisten %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// Server is a redis-server process of the test's own, on a free loopback port, that the test can freeze
// (SIGSTOP: connections stay open and writes are accepted by the kernel, but nothing is answered — a hung
// Redis) and thaw (SIGCONT). It is killed when the test ends. Persistence is off.
type Server struct {
	t    testing.TB
	addr string
	cmd  *exec.Cmd

	mu      sync.Mutex
	stopped bool
}

// StartServer starts redis-server (from PATH) and waits until it answers PING. Without -short a missing
// binary fails the test; it never skips.
func StartServer(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts redis-server; skipped in -short mode")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("admissiontest: redis-server not found: %v", err)
	}
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", t.TempDir(), "--loglevel", "warning")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatalf("admissiontest: start redis-server: %v", err)
		}
		s := &Server{t: t, addr: addr, cmd: cmd}
		t.Cleanup(s.kill)
		if s.waitPing(10 * time.Second) {
			return s
		}
		s.kill()
		if attempt == 2 {
			t.Fatalf("admissiontest: redis-server on %s did not answer", addr)
		}
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *Server) waitPing(limit time.Duration) bool {
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.addr + "/0" }

// Stop freezes the server (SIGSTOP).
func (s *Server) Stop() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("admissiontest: SIGSTOP redis-server: %v", err)
	}
	s.stopped = true
}

// Cont thaws a stopped server (SIGCONT); what it received meanwhile is then processed.
func (s *Server) Cont() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		s.t.Fatalf("admissiontest: SIGCONT redis-server: %v", err)
	}
	s.stopped = false
}

// Stopped reports whether the server is frozen.
func (s *Server) Stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
