package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a throwaway certificate authority for tests: it issues server certificates for 127.0.0.1 and
// localhost and client certificates, all written as PEM files into test temp dirs.
type CA struct {
	// File is the CA certificate's PEM file: the bundle servers and clients trust.
	File string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

var serial atomic.Int64

func nextSerial() *big.Int { return big.NewInt(time.Now().UnixNano() + serial.Add(1)) }

// NewCA creates a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	writePEM(t, file, "CERTIFICATE", der)
	return &CA{File: file, cert: cert, key: key}
}

// Server issues a server certificate for 127.0.0.1 and localhost named cn and returns its files.
func (ca *CA) Server(t testing.TB, cn string) (certFile, keyFile string) {
	t.Helper()
	return ca.issue(t, cn, x509.ExtKeyUsageServerAuth, filepath.Join(t.TempDir(), "server"))
}

// Client issues a client certificate named cn and returns its files.
func (ca *CA) Client(t testing.TB, cn string) (certFile, keyFile string) {
	t.Helper()
	return ca.issue(t, cn, x509.ExtKeyUsageClientAuth, filepath.Join(t.TempDir(), "client"))
}

// ServerTo issues a server certificate named cn into certFile and keyFile, replacing what they hold (to
// test certificate reloading).
func (ca *CA) ServerTo(t testing.TB, cn, certFile, keyFile string) {
	t.Helper()
	ca.write(t, cn, x509.ExtKeyUsageServerAuth, certFile, keyFile)
}

// ClientTo issues a client certificate named cn into certFile and keyFile, replacing what they hold.
func (ca *CA) ClientTo(t testing.TB, cn, certFile, keyFile string) {
	t.Helper()
	ca.write(t, cn, x509.ExtKeyUsageClientAuth, certFile, keyFile)
}

func (ca *CA) issue(t testing.TB, cn string, usage x509.ExtKeyUsage, base string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = base+"-cert.pem", base+"-key.pem"
	ca.write(t, cn, usage, certFile, keyFile)
	return certFile, keyFile
}

func (ca *CA) write(t testing.TB, cn string, usage x509.ExtKeyUsage, certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses, tmpl.DNSNames = []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Key first: a reader seeing the new certificate finds its key already in place.
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	writePEM(t, certFile, "CERTIFICATE", der)
}

// ClientConfig is a client tls.Config trusting ca and, when certFile is set, presenting that certificate.
func (ca *CA) ClientConfig(t testing.TB, certFile, keyFile string) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// writePEM writes the block atomically (temp file and rename), as a Secret volume update does.
func writePEM(t testing.TB, file, typ string, der []byte) {
	t.Helper()
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}
