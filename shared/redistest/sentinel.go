package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a running Redis Sentinel setup: a master with one replica, watched by three sentinels
// (quorum two) under the master name SentinelMaster.
type Sentinel struct {
	// Master and Replica are the data nodes' addresses at start; Sentinels the sentinels'.
	Master, Replica string
	Sentinels       []string
	procs           []*exec.Cmd
}

// SentinelMaster is the name the sentinels monitor the master under.
const SentinelMaster = "tollgate"

// URL names the sentinels in go-redis's multi-address form: redis://first?addr=second&addr=third.
func (s *Sentinel) URL() string {
	u := "redis://" + s.Sentinels[0]
	for i, a := range s.Sentinels[1:] {
		if i == 0 {
			u += "?addr=" + a
		} else {
			u += "&addr=" + a
		}
	}
	return u
}

// StartSentinel starts a master, a replica of it and three sentinels (redis-server --sentinel) on free
// loopback ports, and waits until every sentinel knows the master and its replica. The processes are
// killed at the end of the test.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not installed (Debian package redis-server): %v", err)
	}
	dir := t.TempDir()
	s := &Sentinel{}
	t.Cleanup(s.stop)
	s.Master = s.start(t, dir, "master", nil)
	s.Replica = s.start(t, dir, "replica", []string{"--replicaof", "127.0.0.1", port(s.Master)})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if info, err := nodeCommand(s.Replica, "INFO", "replication"); err == nil && containsAll(info, "role:slave", "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s never synced with %s", s.Replica, s.Master)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range 3 {
		conf := filepath.Join(dir, "sentinel"+strconv.Itoa(i)+".conf")
		body := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %s 2\nsentinel down-after-milliseconds %s 2000\nsentinel failover-timeout %s 10000\n",
			SentinelMaster, port(s.Master), SentinelMaster, SentinelMaster)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		s.Sentinels = append(s.Sentinels, s.start(t, dir, "sentinel"+strconv.Itoa(i), []string{"--sentinel"}, conf))
	}
	for _, a := range s.Sentinels {
		for {
			v, err := sentinelCommand(a, "SENTINEL", "REPLICAS", SentinelMaster)
			if err == nil && len(v) >= 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sentinel %s does not see the replica: %v %v", a, v, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return s
}

// start starts one redis-server (a config file first when given) on a free loopback port.
func (s *Sentinel) start(t testing.TB, dir, name string, extra []string, conf ...string) string {
	t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		p, ok := freePortPair()
		if !ok {
			continue
		}
		addr := "127.0.0.1:" + strconv.Itoa(p)
		nodeDir := filepath.Join(dir, name)
		if err := os.MkdirAll(nodeDir, 0o700); err != nil {
			t.Fatal(err)
		}
		args := append(conf, "--port", strconv.Itoa(p), "--bind", "127.0.0.1", "--dir", nodeDir, "--save", "", "--appendonly", "no",
			"--protected-mode", "no", "--daemonize", "no", "--logfile", filepath.Join(nodeDir, "redis.log"))
		args = append(args, extra...)
		cmd := exec.Command("redis-server", args...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		s.procs = append(s.procs, cmd)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if pong, err := nodeCommand(addr, "PING"); err == nil && pong == "PONG" {
				return addr
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Fatalf("could not start %s on a free loopback port", name)
	return ""
}

func (s *Sentinel) stop() {
	for _, cmd := range s.procs {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// Failover makes the sentinels fail the master over to its replica the way a planned failover must be
// run not to lose writes: writes on the master are paused first (CLIENT PAUSE 5000 WRITE), so the replica
// has every acknowledged write when SENTINEL FAILOVER promotes it and reconfigures the old master as its
// replica. (Without the pause, writes the old master acknowledges between the promotion and its
// reconfiguration are discarded.) It waits until the sentinels name the replica as master and it answers
// as one, and returns the new master's address.
func (s *Sentinel) Failover(t testing.TB) string {
	t.Helper()
	old := s.MasterAddr(t)
	if _, err := nodeCommand(old, "CLIENT", "PAUSE", "5000", "WRITE"); err != nil {
		t.Fatalf("CLIENT PAUSE on %s: %v", old, err)
	}
	if _, err := nodeCommand(s.Sentinels[0], "SENTINEL", "FAILOVER", SentinelMaster); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		now := s.MasterAddr(t)
		if info, err := nodeCommand(now, "ROLE"); now != old && err == nil && len(info) > 0 && containsAll(info, "master") {
			return now
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinels still name %s as master", now)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// MasterAddr is the master's address as the first sentinel names it.
func (s *Sentinel) MasterAddr(t testing.TB) string {
	t.Helper()
	v, err := sentinelCommand(s.Sentinels[0], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
	if err != nil || len(v) != 2 {
		t.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME: %v %v", v, err)
	}
	return fmt.Sprint(v[0]) + ":" + fmt.Sprint(v[1])
}

func sentinelCommand(addr string, args ...any) ([]any, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return rdb.Do(ctx, args...).Slice()
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
