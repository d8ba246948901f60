package dev

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestMakeRunStackServesTheCurlLine builds the real binaries, starts the stack the way `make run` does
// (against the test Postgres and Redis), and performs the request the printed curl line performs.
func TestMakeRunStackServesTheCurlLine(t *testing.T) {
	db := storetest.New(t)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator),
		"github.com/tollgate/tollgate/controlplane/cmd/controlplane",
		"github.com/tollgate/tollgate/dataplane/cmd/dataplane",
		"github.com/tollgate/tollgate/deploy/mockupstream/cmd/mockupstream")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	redisURL := os.Getenv("TOLLGATE_TEST_REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	prefix := fmt.Sprintf("test:devstack:%d:", time.Now().UnixNano())
	t.Cleanup(func() {
		opts, err := redis.ParseURL(redisURL)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		ctx := context.Background()
		keys, _ := rdb.Keys(ctx, prefix+"*").Result()
		for _, k := range keys {
			rdb.Del(ctx, k)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var logs syncBuffer
	st, err := Start(ctx, Options{
		BinDir: bin, DatabaseURL: db.URL, RedisURL: redisURL, RedisKeyPrefix: prefix,
		DataPlane: freeAddr(t), AdminHTTP: freeAddr(t), GRPC: freeAddr(t), Mock: freeAddr(t),
		Log: &logs,
	})
	if err != nil {
		t.Fatalf("Start: %v\nlogs:\n%s", err, logs.String())
	}
	defer st.Stop()
	line := st.CurlLine()
	if !strings.HasPrefix(line, "curl ") || !strings.Contains(line, st.APIKey) {
		t.Fatalf("CurlLine = %q", line)
	}
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Hello from Tollgate"}]}`, st.Model)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+st.DataPlane+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+st.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat completion = %d %s\nlogs:\n%s", resp.StatusCode, raw, logs.String())
	}
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	if out.Object != "chat.completion" || len(out.Choices) == 0 || out.Choices[0].Message.Content == "" || out.Usage.TotalTokens == 0 {
		t.Fatalf("unexpected completion: %s", raw)
	}
}

// syncBuffer is a bytes.Buffer safe for the child processes' concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
