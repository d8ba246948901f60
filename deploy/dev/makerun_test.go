package dev

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/testkit"
)

// TestMakeRunBannerRequestsWorkAndCtrlCStopsAll runs bin/devstack the way `make run` does (throwaway
// Postgres and Redis, no TOLLGATE_* settings), performs every request line its banner prints as a shell
// reads it, each answering 200 in its own dialect's shape, then sends SIGINT (a terminal's Ctrl-C) and
// requires devstack and every process group it started to be gone within 5 s.
func TestMakeRunBannerRequestsWorkAndCtrlCStopsAll(t *testing.T) {
	bin := buildStackBinaries(t)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOLLGATE_") {
			env = append(env, kv)
		}
	}
	dp := freeAddr(t)
	cmd := exec.Command(filepath.Join(bin, "devstack"), "-bin", bin,
		"-dp-addr", dp, "-admin-addr", freeAddr(t), "-grpc-addr", freeAddr(t), "-mock-addr", freeAddr(t))
	cmd.Env = env
	var logs testkit.Buffer
	cmd.Stderr = &logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { // a failed test must not leave the stack running
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var banner []string
	timeout := time.After(3 * time.Minute)
	for up := false; !up; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("devstack ended before its banner was complete:\n%s\nstderr:\n%s", strings.Join(banner, "\n"), logs.String())
			}
			banner = append(banner, l)
			up = strings.TrimSpace(l) == "Ctrl-C stops everything."
		case <-timeout:
			t.Fatalf("no complete banner after 3 minutes:\n%s\nstderr:\n%s", strings.Join(banner, "\n"), logs.String())
		}
	}
	go func() { // keep draining stdout so devstack never blocks on it
		for range lines {
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sdkFor := map[string]string{"/v1/chat/completions": "OpenAI", "/v1/responses": "OpenAI", "/v1/messages": "Anthropic",
		"/v1beta/models/" + DemoModel + ":generateContent": "Google Gen AI"}
	seen := map[string]bool{}
	for i, l := range banner {
		line := strings.TrimSpace(l)
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		path := curlRequest(t, ctx, line, nil).URL.Path
		sdk, ok := sdkFor[path]
		if !ok {
			t.Errorf("banner request to %s, which this test does not expect", path)
			continue
		}
		if i == 0 || !strings.Contains(banner[i-1], sdk) {
			t.Errorf("banner request to %s: the line above does not name the %s SDKs", path, sdk)
		}
		seen[path] = true
		runCurlLine(t, ctx, line, nil)
	}
	for path := range sdkFor {
		if !seen[path] {
			t.Errorf("the banner has no request to %s:\n%s", path, strings.Join(banner, "\n"))
		}
	}

	groups := childGroups(t, cmd.Process.Pid)
	var names []string
	for _, name := range groups {
		names = append(names, name)
	}
	for _, want := range []string{"postgres", "redis-server", "mockupstream", "controlplane", "dataplane"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Fatalf("devstack's children are %v: no %s", names, want)
		}
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	deadline := start.Add(5 * time.Second)
	var exitErr error
	devstackDone := false
	for {
		if !devstackDone {
			select {
			case exitErr = <-exited:
				devstackDone = true
				exited <- exitErr // for the cleanup
			default:
			}
		}
		alive := liveGroups(groups)
		if devstackDone && len(alive) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after SIGINT: devstack exited %v, process groups still alive: %v\nstderr:\n%s", devstackDone, alive, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("everything stopped %s after SIGINT", time.Since(start).Round(time.Millisecond))
	if exitErr != nil {
		t.Errorf("devstack exited with %v after SIGINT, want status 0", exitErr)
	}
}

// childGroups returns the process groups of parent's children (each child runs in its own group, which
// its own children join), with the child's command name.
func childGroups(t *testing.T, parent int) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	groups := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
		s := string(stat)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			t.Fatalf("/proc/%d/stat: %q", pid, s)
		}
		f := strings.Fields(s[closing+1:])
		if len(f) < 3 {
			t.Fatalf("/proc/%d/stat: %q", pid, s)
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		if ppid == parent {
			groups[pgrp] = s[open+1 : closing]
		}
	}
	return groups
}

// liveGroups lists the groups that still hold a process (a zombie counts: it has not been reaped).
func liveGroups(groups map[int]string) []string {
	var alive []string
	for pgrp, name := range groups {
		if err := syscall.Kill(-pgrp, 0); !errors.Is(err, syscall.ESRCH) {
			alive = append(alive, fmt.Sprintf("%s (group %d)", name, pgrp))
		}
	}
	return alive
}
