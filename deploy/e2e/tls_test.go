package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/tlstest"
)

// TestWatchOverTLS runs the control plane with TOLLGATE_CP_TLS_CERT/KEY (a self-signed certificate made
// here) and data planes with TOLLGATE_CP_CA_FILE: the one trusting the certificate gets snapshots; one
// without TLS, and one with the right CA but the wrong token, never become ready.
func TestWatchOverTLS(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	base := c.seed()
	certFile, keyFile := tlstest.SelfSigned(t)
	cp := c.startCP("cp-tls", "", "TOLLGATE_CP_TLS_CERT", certFile, "TOLLGATE_CP_TLS_KEY", keyFile)
	addr := cp.srv.GRPCAddr()

	secure := c.startDP("dp-tls", []string{addr}, "TOLLGATE_CP_CA_FILE", certFile)
	plain := c.startDP("dp-plain", []string{addr})
	wrongToken := c.startDP("dp-wrong-token", []string{addr}, "TOLLGATE_CP_CA_FILE", certFile,
		"TOLLGATE_DP_TOKEN", "definitely-not-the-token")

	secure.wait(t, base)
	secure.wantReady(t, base)
	v := exec(t, cp.srv.Pool, `UPDATE price_rules SET input_price = 0.5 WHERE id = 1`)
	if got := inputPrice(t, secure.wait(t, v)); got != "0.5" {
		t.Fatalf("input price over TLS = %s, want 0.5", got)
	}
	time.Sleep(300 * time.Millisecond) // several reconnect attempts
	for _, d := range []*dp{plain, wrongToken} {
		if code, _ := d.readyz(t); code != http.StatusServiceUnavailable || d.srv.Syncer.Current() != nil {
			t.Errorf("%s: /readyz %d, snapshot %v; want 503 and none", d.name, code, d.srv.Syncer.Current())
		}
	}
}
