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
	if len(os.Args) > 1 && os.Args[1] == "seed" {
		seed(os.Args[2:])
		return
	}
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
	fmt.Print(st.Banner())
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "devstack: stopping")
	st.Stop()
}

// seed seeds a control plane that is already running (the compose file's seed service):
// devstack seed [-admin-addr host:port] [-mock-url URL] [-dp-url URL], admin token from TOLLGATE_ADMIN_TOKEN.
func seed(args []string) {
	fs := flag.NewFlagSet("devstack seed", flag.ExitOnError)
	admin := fs.String("admin-addr", envOr("TOLLGATE_DEV_ADMIN_ADDR", "127.0.0.1:8081"), "control plane admin address (TOLLGATE_DEV_ADMIN_ADDR)")
	mock := fs.String("mock-url", envOr("TOLLGATE_DEV_MOCK_URL", "http://127.0.0.1:9999"), "mock upstream base URL the demo provider uses (TOLLGATE_DEV_MOCK_URL)")
	dpURL := fs.String("dp-url", envOr("TOLLGATE_DEV_DP_URL", "http://127.0.0.1:8080"), "data plane URL printed in the example requests (TOLLGATE_DEV_DP_URL)")
	_ = fs.Parse(args)
	token := os.Getenv("TOLLGATE_ADMIN_TOKEN")
	if token == "" {
		fmt.Fprintln(os.Stderr, "devstack seed: TOLLGATE_ADMIN_TOKEN is required (the control plane's admin token)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	key, err := dev.SeedDemo(ctx, *admin, token, *mock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstack seed:", err)
		stop()
		os.Exit(1)
	}
	fmt.Println("Demo seeded. Try it, one request per dialect:")
	for _, e := range dev.Examples(dev.DemoModel) {
		fmt.Printf("\n  %s\n  %s\n", e.Comment(*dpURL), e.CurlLine(*dpURL, key))
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
