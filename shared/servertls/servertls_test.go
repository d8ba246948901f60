package servertls_test

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/servertls"
	"github.com/tollgate/tollgate/shared/tlstest"
)

// serve runs an HTTP server on a loopback TLS listener made with cfg, as the apps do, and returns its URL.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto)
	}), ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String()
}

func get(t *testing.T, url string, cfg *tls.Config) (string, error) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}, Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestClientCertificateRequired: with ClientCA set, a client without a certificate, or with one from
// another CA, is refused in the handshake; one with a certificate the CA signed is served.
func TestClientCertificateRequired(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	other := tlstest.NewCA(t, "other CA")
	cert, key := ca.Server(t, "server")
	cfg, err := servertls.Config(servertls.Files{Cert: cert, Key: key, ClientCA: ca.File}, "h2", "http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, cfg)

	if _, err := get(t, url, ca.ClientConfig(t, "", "")); err == nil {
		t.Error("a client without a certificate was served")
	}
	oc, ok := other.Client(t, "stranger")
	if _, err := get(t, url, ca.ClientConfig(t, oc, ok)); err == nil {
		t.Error("a client with another CA's certificate was served")
	}
	cc, ck := ca.Client(t, "admin")
	proto, err := get(t, url, ca.ClientConfig(t, cc, ck))
	if err != nil {
		t.Fatalf("a client with a good certificate: %v", err)
	}
	if proto != "HTTP/2.0" {
		t.Errorf("protocol %q, want HTTP/2.0 negotiated by ALPN", proto)
	}
}

// TestCertificateReloadedWhenFilesChange: a certificate rewritten in place is served to new connections.
func TestCertificateReloadedWhenFilesChange(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	cert, key := ca.Server(t, "first")
	cfg, err := servertls.Config(servertls.Files{Cert: cert, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	servedCN := func() string {
		c, err := tls.Dial("tcp", ln.Addr().String(), ca.ClientConfig(t, "", ""))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if cn := servedCN(); cn != "first" {
		t.Fatalf("served %q, want first", cn)
	}
	ca.ServerTo(t, "second", cert, key)
	deadline := time.Now().Add(10 * time.Second)
	for servedCN() != "second" {
		if time.Now().After(deadline) {
			t.Fatal("the rewritten certificate was never served")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConfigRefusesBadFiles: a missing or garbled file fails at start, naming the problem.
func TestConfigRefusesBadFiles(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	cert, key := ca.Server(t, "server")
	for name, f := range map[string]servertls.Files{
		"missing cert":    {Cert: cert + ".missing", Key: key},
		"key as cert":     {Cert: key, Key: key},
		"CA not PEM":      {Cert: cert, Key: key, ClientCA: key},
		"missing CA file": {Cert: cert, Key: key, ClientCA: ca.File + ".missing"},
	} {
		if _, err := servertls.Config(f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := (servertls.Files{Cert: cert}).Check("C", "K", "CA"); err == nil || !strings.Contains(err.Error(), "set both") {
		t.Errorf("cert without key: %v", err)
	}
	if err := (servertls.Files{ClientCA: cert}).Check("C", "K", "CA"); err == nil || !strings.Contains(err.Error(), "CA needs") {
		t.Errorf("client CA without cert: %v", err)
	}
}

// TestClientCertificateReloaded: a client certificate rewritten in place is presented on new connections.
func TestClientCertificateReloaded(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	cert, key := ca.Server(t, "server")
	cfg, err := servertls.Config(servertls.Files{Cert: cert, Key: key, ClientCA: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cns := make(chan string, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			if tc.Handshake() == nil {
				cns <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
			}
			c.Close()
		}
	}()
	ccert, ckey := ca.Client(t, "first")
	get, err := servertls.ClientCertificate(ccert, ckey)
	if err != nil {
		t.Fatal(err)
	}
	clientCfg := ca.ClientConfig(t, "", "")
	clientCfg.GetClientCertificate = get
	presented := func() string {
		c, err := tls.Dial("tcp", ln.Addr().String(), clientCfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return <-cns
	}
	if cn := presented(); cn != "first" {
		t.Fatalf("presented %q, want first", cn)
	}
	ca.ClientTo(t, "second", ccert, ckey)
	deadline := time.Now().Add(10 * time.Second)
	for presented() != "second" {
		if time.Now().After(deadline) {
			t.Fatal("the rewritten client certificate was never presented")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := servertls.ClientCertificate(ccert+".missing", ckey); err == nil {
		t.Error("a missing client certificate file was accepted")
	}
}
