// Package redistest starts real Redis servers for tests: a Redis Cluster of loopback redis-server
// processes (redis-server --cluster-enabled yes, joined with redis-cli --cluster create), stopped when
// the test ends. It needs the redis-server and redis-cli binaries (Debian package redis-server).
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

// Cluster is a running Redis Cluster.
type Cluster struct {
	// Masters are the addresses of the nodes that were masters at start; Replicas of the others.
	Masters, Replicas []string
	procs             map[string]*exec.Cmd
}

// URL is the cluster in go-redis's cluster URL form: redis://first?addr=second&addr=third... (every
// master; a client discovers the rest from any of them).
func (c *Cluster) URL() string {
	u := "redis://" + c.Masters[0]
	for i, a := range c.Masters[1:] {
		if i == 0 {
			u += "?addr=" + a
		} else {
			u += "&addr=" + a
		}
	}
	return u
}

// StartCluster starts masters × (1 + replicas) redis-server processes on free loopback ports, joins them
// into one cluster with every slot covered and waits until every node reports cluster_state:ok. The
// processes are killed at the end of the test.
func StartCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not installed (Debian package redis-server): %v", bin, err)
		}
	}
	dir := t.TempDir()
	c := &Cluster{procs: map[string]*exec.Cmd{}}
	t.Cleanup(c.stop)
	var addrs []string
	for range masters * (1 + replicas) {
		addr := c.startNode(t, dir)
		addrs = append(addrs, addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, a := range addrs {
		for {
			info, err := nodeCommand(a, "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_slots_assigned:16384") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s never reported cluster_state:ok: %v\n%s", a, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, a := range addrs {
		if role, _ := c.Role(a); role == "master" {
			c.Masters = append(c.Masters, a)
		} else {
			c.Replicas = append(c.Replicas, a)
		}
	}
	if len(c.Masters) != masters {
		t.Fatalf("cluster has masters %v, want %d", c.Masters, masters)
	}
	// Replicas attach (and sync) after the cluster forms: wait until every master lists its replicas online.
	for _, m := range c.Masters {
		for len(c.onlineReplicas(m)) < replicas {
			if time.Now().After(deadline) {
				t.Fatalf("master %s has replicas %v, want %d", m, c.onlineReplicas(m), replicas)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// startNode starts one cluster-enabled redis-server whose port and cluster bus port (+10000) are free.
func (c *Cluster) startNode(t testing.TB, dir string) string {
	t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		port, ok := freePortPair()
		if !ok {
			continue
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		nodeDir := filepath.Join(dir, strconv.Itoa(port))
		if err := os.MkdirAll(nodeDir, 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
			"--dir", nodeDir, "--save", "", "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no",
			"--logfile", filepath.Join(nodeDir, "redis.log"))
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		c.procs[addr] = cmd
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if pong, err := nodeCommand(addr, "PING"); err == nil && pong == "PONG" {
				return addr
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Not answering (the port was taken meanwhile): try another.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		delete(c.procs, addr)
	}
	t.Fatal("could not start a redis-server on a free loopback port")
	return ""
}

// freePortPair finds a loopback port p with p+10000 (its cluster bus) free too.
func freePortPair() (int, bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, false
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if port+10000 > 65535 {
		return 0, false
	}
	bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
	if err != nil {
		return 0, false
	}
	bus.Close()
	return port, true
}

func (c *Cluster) stop() {
	for _, cmd := range c.procs {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// Role returns "master" or "slave" for the node at addr (ROLE).
func (c *Cluster) Role(addr string) (string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := rdb.Do(ctx, "ROLE").Slice()
	if err != nil || len(v) == 0 {
		return "", fmt.Errorf("ROLE on %s: %w", addr, err)
	}
	role, _ := v[0].(string)
	return role, nil
}

// Failover promotes a replica of the master at addr with CLUSTER FAILOVER (a manual failover: the master
// stops taking writes, the replica catches up and takes over) and waits until the replica is master and
// every node agrees the cluster is ok. It returns the new master's address.
func (c *Cluster) Failover(t testing.TB, master string) string {
	t.Helper()
	replica := c.replicaOf(t, master)
	if _, err := nodeCommand(replica, "CLUSTER", "FAILOVER"); err != nil {
		t.Fatalf("CLUSTER FAILOVER on %s: %v", replica, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if role, _ := c.Role(replica); role == "master" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s never became master", replica)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, m := range c.Masters {
		if m == master {
			c.Masters[i] = replica
		}
	}
	for i, r := range c.Replicas {
		if r == replica {
			c.Replicas[i] = master
		}
	}
	return replica
}

// replicaOf returns the address of a replica the master lists as online (INFO replication).
func (c *Cluster) replicaOf(t testing.TB, master string) string {
	t.Helper()
	reps := c.onlineReplicas(master)
	if len(reps) == 0 {
		t.Fatalf("master %s has no online replica", master)
	}
	return reps[0]
}

// onlineReplicas lists the replicas the master at addr reports online (INFO replication slaveN lines).
func (c *Cluster) onlineReplicas(master string) []string {
	rdb := redis.NewClient(&redis.Options{Addr: master})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(info, "\n") {
		// slave0:ip=127.0.0.1,port=7004,state=online,offset=42,lag=0
		if !strings.HasPrefix(line, "slave") || !strings.Contains(line, "state=online") {
			continue
		}
		var ip, port string
		for _, kv := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "ip":
				ip = v
			case "port":
				port = v
			}
		}
		out = append(out, net.JoinHostPort(ip, port))
	}
	return out
}

// nodeCommand runs one command on one node (not cluster-routed) and returns its reply as text.
func nodeCommand(addr string, args ...string) (string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a := make([]any, len(args))
	for i, s := range args {
		a[i] = s
	}
	v, err := rdb.Do(ctx, a...).Result()
	if err != nil {
		return "", err
	}
	return fmt.Sprint(v), nil
}
