package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

func TestCredentialsCooldown(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(Options{CredentialCooldown: 30 * time.Second, Now: func() time.Time { return now }, IntN: func(int) int { return 0 }})
	p := &snapshot.Provider{Credentials: []snapshot.Credential{{ID: 1, Weight: 1}, {ID: 2, Weight: 5}, {ID: 3, Weight: 1}}}
	ids := func() []int64 {
		var out []int64
		for _, cr := range c.Credentials(p, nil) {
			out = append(out, cr.ID)
		}
		return out
	}
	if got := ids(); len(got) != 3 || got[0] != 1 {
		t.Fatalf("Credentials = %v, want 3 starting with 1 (draw 0)", got)
	}
	c.Fail(1)
	if !c.Cooling(1) {
		t.Fatal("credential 1 not cooling after Fail")
	}
	if got := ids(); len(got) != 3 || got[2] != 1 {
		t.Fatalf("Credentials after Fail(1) = %v, want 1 last", got)
	}
	now = now.Add(31 * time.Second)
	if c.Cooling(1) {
		t.Fatal("credential 1 still cooling after the cooldown")
	}
}

func TestSetAuthAndHeaders(t *testing.T) {
	in := http.Header{"Authorization": {"Bearer client"}, "X-Api-Key": {"client"}, "X-Goog-Api-Key": {"client"},
		"Openai-Organization": {"org"}, "Anthropic-Beta": {"b"}, "Connection": {"close"}, "Accept-Encoding": {"gzip"}}
	tests := []struct {
		ch   vocab.ChannelType
		want map[string]string
	}{
		{vocab.ChannelAlpha, map[string]string{"Authorization": "Bearer s", "X-Api-Key": "", "X-Goog-Api-Key": ""}},
		{vocab.ChannelRouter, map[string]string{"Authorization": "Bearer s"}},
		{vocab.ChannelBeta, map[string]string{"X-Api-Key": "s", "Anthropic-Version": DefaultBetaVersion, "Authorization": ""}},
		{vocab.ChannelGamma, map[string]string{"X-Goog-Api-Key": "s", "Authorization": ""}},
	}
	for _, tt := range tests {
		h := OutboundHeader(in)
		SetAuth(h, tt.ch, "s")
		for k, v := range tt.want {
			if got := h.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", tt.ch, k, got, v)
			}
		}
		if h.Get("Openai-Organization") != "org" || h.Get("Anthropic-Beta") != "b" || h.Get("Connection") != "" || h.Get("Accept-Encoding") != "" {
			t.Errorf("%s: headers = %v", tt.ch, h)
		}
	}
	h := http.Header{"Anthropic-Version": {"2099-01-01"}}
	SetAuth(h, vocab.ChannelBeta, "s")
	if h.Get("Anthropic-Version") != "2099-01-01" {
		t.Errorf("client anthropic-version not kept: %v", h)
	}
}

func TestTimeout(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	c := New(Options{ConnectTimeout: time.Second, IdleTimeout: time.Second, ResponseHeaderTimeout: 50 * time.Millisecond})
	defer c.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	_, err := c.Do(req)
	if err == nil || !IsTimeout(err) {
		t.Fatalf("Do = %v, want a timeout", err)
	}
	if IsTimeout(context.Canceled) || IsTimeout(errors.New("x")) {
		t.Error("IsTimeout true for a non-timeout")
	}
	if !Retryable(429) || !Retryable(503) || Retryable(400) {
		t.Error("Retryable wrong")
	}
}
