// Package servertls builds the TLS configuration of a listener from PEM files: the certificate and key,
// re-read when either file changes (so a renewed certificate — cert-manager, a mounted Secret — is served
// to new connections without a restart), and optionally a client CA bundle that makes the listener
// require and verify a client certificate (mutual TLS). ClientCertificate gives a TLS client the same
// reloading for the certificate it presents.
package servertls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Files names a listener's TLS material. Cert and Key are both set or both empty (no TLS); ClientCA
// needs them.
type Files struct {
	Cert, Key string
	// ClientCA, when set, requires every client to present a certificate signed by a CA in this bundle.
	ClientCA string
}

// Enabled reports whether the listener serves TLS.
func (f Files) Enabled() bool { return f.Cert != "" }

// Check validates the combination, naming the settings with names ("TOLLGATE_X_TLS" style prefix).
func (f Files) Check(certName, keyName, caName string) error {
	if (f.Cert == "") != (f.Key == "") {
		return fmt.Errorf("%s and %s: set both or neither", certName, keyName)
	}
	if f.ClientCA != "" && f.Cert == "" {
		return fmt.Errorf("%s needs %s and %s", caName, certName, keyName)
	}
	return nil
}

// reloadCheck is the least time between two looks at the files' modification times.
const reloadCheck = time.Second

// Config returns a server tls.Config (TLS 1.2 or later) serving f's certificate, reloaded when the files
// change, and requiring client certificates when f.ClientCA is set. The files are read once here, so a
// missing or bad file fails at start. nextProtos are the ALPN protocols offered ("h2", "http/1.1").
func Config(f Files, nextProtos ...string) (*tls.Config, error) {
	if !f.Enabled() {
		return nil, errors.New("no TLS certificate configured")
	}
	r := &reloader{cert: f.Cert, key: f.Key}
	if err := r.load(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: nextProtos,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.get(), nil }}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("read client CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client CA file %s holds no PEM certificate", f.ClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// reloader holds the current certificate and re-reads it when the files' modification times change. A
// failed reload (a half-written file) keeps the previous certificate and is retried at the next check.
type reloader struct {
	cert, key string

	mu        sync.Mutex
	current   *tls.Certificate
	certMod   time.Time
	keyMod    time.Time
	lastCheck time.Time
}

func (r *reloader) load() error {
	cm, km, err := r.modTimes()
	if err != nil {
		return err
	}
	c, err := tls.LoadX509KeyPair(r.cert, r.key)
	if err != nil {
		return fmt.Errorf("load TLS certificate %s and key %s: %w", r.cert, r.key, err)
	}
	r.current, r.certMod, r.keyMod = &c, cm, km
	return nil
}

func (r *reloader) modTimes() (cert, key time.Time, err error) {
	ci, err := os.Stat(r.cert)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("TLS certificate: %w", err)
	}
	ki, err := os.Stat(r.key)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("TLS key: %w", err)
	}
	return ci.ModTime(), ki.ModTime(), nil
}

// ClientCertificate returns a tls.Config.GetClientCertificate presenting the certificate in certFile and
// keyFile, re-read when either changes (a failed read keeps the previous one). The files are read once
// here, so a missing or bad file fails at start.
func ClientCertificate(certFile, keyFile string) (func(*tls.CertificateRequestInfo) (*tls.Certificate, error), error) {
	r := &reloader{cert: certFile, key: keyFile}
	if err := r.load(); err != nil {
		return nil, err
	}
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return r.get(), nil }, nil
}

func (r *reloader) get() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.lastCheck) >= reloadCheck {
		r.lastCheck = now
		if cm, km, err := r.modTimes(); err == nil && (!cm.Equal(r.certMod) || !km.Equal(r.keyMod)) {
			_ = r.load() // on failure the previous certificate stays, and the next check retries
		}
	}
	return r.current
}
