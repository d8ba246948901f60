// Command devstack runs the local development stack behind `make run`; see deploy/dev.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate/tollgate/deploy/dev"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding the built binaries")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := dev.Start(ctx, dev.Options{
		BinDir:      *bin,
		DatabaseURL: os.Getenv("TOLLGATE_DATABASE_URL"),
		RedisURL:    os.Getenv("TOLLGATE_REDIS_URL"),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(1)
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
