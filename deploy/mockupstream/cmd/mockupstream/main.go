// Command mockupstream runs the fake upstream provider (package mockupstream) on -addr
// (default 127.0.0.1:9999, env MOCKUPSTREAM_ADDR) until SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate/tollgate/deploy/mockupstream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := mockupstream.Main(ctx, os.Args[1:], os.Getenv, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "mockupstream:", err)
		stop()
		os.Exit(1)
	}
}
