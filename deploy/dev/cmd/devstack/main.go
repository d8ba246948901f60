// Command devstack runs the local development stack behind `make run`; see deploy/dev.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate/tollgate/deploy/dev"
)

func main() {
	opts, err := dev.ParseFlags(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := dev.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		stop()
		os.Exit(1) // Start stopped everything it had started
	}
	fmt.Printf(`
Tollgate is running.
  data plane     http://%s
  admin API      http://%s   (admin token: %s)
  console        http://%s/console
  demo API key   %s

Try it:
  %s

Ctrl-C stops everything.
`, st.DataPlane, st.AdminHTTP, st.AdminToken, st.AdminHTTP, st.APIKey, st.CurlLine())
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "devstack: stopping")
	st.Stop()
}
