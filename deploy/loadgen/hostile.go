package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HostileResult is one hostile run's report (one JSON line).
type HostileResult struct {
	Label string `json:"label"`
	Conns int    `json:"conns"`
	// Opened connections got their headers and first bytes out; Answered got a response (401, 408, 413…);
	// ClosedByServer were ended by the server before the run's end; OpenAtEnd were still held.
	Opened         int64          `json:"opened"`
	Answered       int64          `json:"answered"`
	ClosedByServer int64          `json:"closed_by_server"`
	OpenAtEnd      int64          `json:"open_at_end"`
	Procs          []ProcMeasure  `json:"procs,omitempty"`
	Statuses       map[string]int `json:"statuses,omitempty"`
}

// runHostile opens -conns connections to -addr that each send a request's headers declaring a
// -declared-byte body, the first -send bytes of it, then one more byte every -trickle, for -hold; it
// samples the -pid processes' RSS (peak every 100 ms) and reports how the server dealt with them.
func runHostile(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("hostile", flag.ContinueOnError)
	addr := fs.String("addr", "", "target host:port")
	path := fs.String("path", "/v1/chat/completions", "request path")
	conns := fs.Int("conns", 1000, "connections")
	key := fs.String("key", "", "API key sent as Authorization: Bearer (empty: none, the request is unauthenticated)")
	declared := fs.Int64("declared", 32<<20, "Content-Length declared")
	send := fs.Int("send", 4<<10, "body bytes sent at once")
	trickle := fs.Duration("trickle", 3*time.Second, "then one more byte every this long")
	hold := fs.Duration("hold", 20*time.Second, "how long to keep the connections going")
	label := fs.String("label", "hostile", "label in the report")
	var targets pids
	fs.Var(&targets, "pid", "process whose RSS to measure (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" {
		return errors.New("hostile: -addr is required")
	}
	var hdr strings.Builder
	fmt.Fprintf(&hdr, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", *path, *addr, *declared)
	if *key != "" {
		fmt.Fprintf(&hdr, "Authorization: Bearer %s\r\n", *key)
	}
	hdr.WriteString("\r\n")
	first := append([]byte(hdr.String()), []byte(`{"model":"chat","messages":[{"role":"user","content":"`)...)
	for len(first) < len(hdr.String())+*send {
		first = append(first, 'a')
	}

	before, peaks, stopPeaks := watchProcs(targets, 100*time.Millisecond)

	var opened, answered, closed atomic.Int64
	var mu sync.Mutex
	statuses := map[string]int{}
	runCtx, cancel := context.WithTimeout(ctx, *hold)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // dial at most 64 at once
	for range *conns {
		sem <- struct{}{}
		wg.Go(func() {
			c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(runCtx, "tcp", *addr)
			<-sem
			if err != nil {
				return
			}
			defer c.Close()
			if _, err := c.Write(first); err != nil {
				return
			}
			opened.Add(1)
			gone := make(chan struct{})
			go func() { // the server's answer, if any, and the end of the connection
				defer close(gone)
				var buf [512]byte
				n, err := io.ReadAtLeast(c, buf[:], len("HTTP/1.1 200"))
				if n > 0 {
					answered.Add(1)
					mu.Lock()
					statuses[strings.TrimSpace(string(buf[9:12]))]++
					mu.Unlock()
				}
				if err == nil {
					_, _ = io.Copy(io.Discard, c)
				}
			}()
			t := time.NewTicker(*trickle)
			defer t.Stop()
			for {
				select {
				case <-runCtx.Done():
					return
				case <-gone:
					if runCtx.Err() == nil {
						closed.Add(1)
					}
					return
				case <-t.C:
					if _, err := c.Write([]byte{'a'}); err != nil {
						<-gone
						if runCtx.Err() == nil {
							closed.Add(1)
						}
						return
					}
				}
			}
		})
	}
	<-runCtx.Done()
	after := make([]procSample, len(targets))
	for i, p := range targets {
		after[i] = sampleProc(p) // while the survivors are still open
	}
	stopPeaks()
	wg.Wait()
	res := HostileResult{Label: *label, Conns: *conns, Opened: opened.Load(), Answered: answered.Load(),
		ClosedByServer: closed.Load(), Statuses: statuses}
	res.OpenAtEnd = res.Opened - res.ClosedByServer
	for i, p := range targets {
		res.Procs = append(res.Procs, ProcMeasure{PID: p, RSSStartMB: round(before[i].rssMB), RSSEndMB: round(after[i].rssMB),
			RSSPeakMB: round(max(peaks[i], after[i].rssMB))})
	}
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	fmt.Fprintln(out, string(b))
	return nil
}
