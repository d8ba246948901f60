package mockupstream

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// The binary takes the clouds' credentials from its environment: the service-account key file the gateway
// is given, Azure keys.
func TestMainCloudCredentials(t *testing.T) {
	key, _ := serviceAccountKeys(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	saPath := filepath.Join(t.TempDir(), "sa.json")
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	env := map[string]string{"MOCKUPSTREAM_AZURE_API_KEYS": "a1, a2", "MOCKUPSTREAM_GOOGLE_SERVICE_ACCOUNT": saPath}
	// The key file names the token URI, so the port is chosen first (a closed test server's).
	var err error
	probe := setup(t, Options{})
	addr := strings.TrimPrefix(probe.srv.URL, "http://")
	probe.srv.Close()
	if err := os.WriteFile(saPath, serviceAccountJSON(t, key, saEmail, "http://"+addr+"/token"), 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		errc <- Main(ctx, []string{"-addr", addr}, func(k string) string { return env[k] }, io.Discard,
			func(a string) { addrc <- a })
	}()
	select {
	case <-addrc:
	case err = <-errc:
		t.Fatalf("Main: %v", err)
	}
	data, _ := os.ReadFile(saPath)
	conf, err := google.JWTConfigFromJSON(data, "s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conf.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, http.DefaultClient)).Token(); err != nil {
		t.Fatalf("token from the binary: %v", err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/openai/v1/embeddings", strings.NewReader(`{"model":"e","input":"x"}`))
	req.Header.Set("api-key", "a2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("azure call: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Main: %v", err)
	}
	if err := Main(context.Background(), []string{"-addr", "127.0.0.1:0", "-google-service-account", filepath.Join(t.TempDir(), "none")},
		func(string) string { return "" }, io.Discard, nil); err == nil {
		t.Fatal("Main with a missing key file = nil, want error")
	}
}

func FuzzServiceAccountPublicKey(f *testing.F) {
	f.Add([]byte(`{"client_email":"a","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"client_email":"a","private_key":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		email, pub, err := serviceAccountPublicKey(data)
		if err == nil && (email == "" || pub == nil) {
			t.Fatalf("accepted %q without an email or key", data)
		}
	})
}
