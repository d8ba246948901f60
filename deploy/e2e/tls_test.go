package e2e

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/testkit"
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

// httpsGet GETs url with a client trusting ca and presenting certFile when set; it returns the status.
func httpsGet(t testing.TB, url string, cfg *tls.Config, header ...string) (int, error) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestListenersOverMutualTLS runs every listener with TLS and client certificates required, all from a
// CA made here: the admin REST/console listener (TOLLGATE_CP_HTTP_TLS_*), the gRPC listener
// (TOLLGATE_CP_TLS_*, the data plane presenting TOLLGATE_CP_CLIENT_CERT/KEY) and the data plane's client
// listener (TOLLGATE_DP_TLS_*). Clients with a certificate the CA signed are served; clients without one,
// or speaking plain HTTP, are refused; a data plane without a client certificate never gets a snapshot.
func TestListenersOverMutualTLS(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	base := c.seed()
	ca := tlstest.NewCA(t, "tollgate test CA")
	cpCert, cpKey := ca.Server(t, "control plane")
	dpCert, dpKey := ca.Server(t, "data plane")
	nodeCert, nodeKey := ca.Client(t, "dp-mtls")
	adminCert, adminKey := ca.Client(t, "operator")
	cp := c.startCP("cp-mtls", "",
		"TOLLGATE_CP_TLS_CERT", cpCert, "TOLLGATE_CP_TLS_KEY", cpKey, "TOLLGATE_CP_TLS_CLIENT_CA", ca.File,
		"TOLLGATE_CP_HTTP_TLS_CERT", cpCert, "TOLLGATE_CP_HTTP_TLS_KEY", cpKey, "TOLLGATE_CP_HTTP_TLS_CLIENT_CA", ca.File)
	addr := cp.srv.GRPCAddr()
	d := c.startDP("dp-mtls", []string{addr}, "TOLLGATE_CP_CA_FILE", ca.File,
		"TOLLGATE_CP_CLIENT_CERT", nodeCert, "TOLLGATE_CP_CLIENT_KEY", nodeKey,
		"TOLLGATE_DP_TLS_CERT", dpCert, "TOLLGATE_DP_TLS_KEY", dpKey, "TOLLGATE_DP_TLS_CLIENT_CA", ca.File)
	noCert := c.startDP("dp-no-client-cert", []string{addr}, "TOLLGATE_CP_CA_FILE", ca.File)
	d.wait(t, base)

	withCert := ca.ClientConfig(t, adminCert, adminKey)
	withoutCert := ca.ClientConfig(t, "", "")
	for _, l := range []struct{ name, url string }{
		{"admin REST", "https://" + cp.srv.HTTPAddr() + "/admin/whoami"},
		{"data-plane client API", "https://" + d.srv.Addr() + "/readyz"},
	} {
		if code, err := httpsGet(t, l.url, withCert, "Authorization", "Bearer "+c.adminTok); err != nil || code != http.StatusOK {
			t.Errorf("%s with a client certificate: %d, %v; want 200", l.name, code, err)
		}
		if code, err := httpsGet(t, l.url, withoutCert, "Authorization", "Bearer "+c.adminTok); err == nil {
			t.Errorf("%s without a client certificate: served %d", l.name, code)
		}
		plainURL := "http://" + strings.TrimPrefix(l.url, "https://")
		if resp, err := http.Get(plainURL); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("%s over plain HTTP: 200", l.name)
			}
		}
	}
	testkit.WaitFor(t, "the data plane's Watch stream", func() bool { return cp.srv.Watch.Watchers() == 1 })
	if noCert.srv.Syncer.Current() != nil || cp.srv.Watch.Watchers() != 1 {
		t.Errorf("a data plane without a client certificate got a snapshot (%v) or a stream", noCert.srv.Syncer.Current())
	}
}
