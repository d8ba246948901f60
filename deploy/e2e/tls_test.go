package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatchOverTLS runs the control plane with TOLLGATE_CP_TLS_CERT/KEY (a self-signed certificate made
// here) and data planes with TOLLGATE_CP_CA_FILE: the one trusting the certificate gets snapshots; one
// without TLS, and one with the right CA but the wrong token, never become ready.
func TestWatchOverTLS(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	base := c.seed()
	certFile, keyFile := writeSelfSigned(t)
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

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and localhost and its key; the
// certificate is its own CA.
func writeSelfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "tollgate e2e control plane"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
