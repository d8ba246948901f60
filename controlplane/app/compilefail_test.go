package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

func getJSON(t *testing.T, url, token string, v any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v: %s", url, err, body)
		}
	}
	return resp.StatusCode
}

type snapshotStatus struct {
	Status           string `json:"status"`
	PublishedVersion int64  `json:"published_version"`
	Failing          bool   `json:"failing"`
	Rejected         *struct {
		Version  int64 `json:"version"`
		Problems []struct {
			Resource string `json:"resource"`
			ID       int64  `json:"id"`
			Field    string `json:"field"`
		} `json:"problems"`
	} `json:"rejected"`
}

// A configuration that does not compile (written around the admin API) is reported loudly: the admin
// status endpoint (REST and gRPC) names the row, /readyz says degraded, the alert gauge is up. Once the
// row is fixed, everything clears.
func TestCompileFailureIsLoud(t *testing.T) {
	srv, db := startServerDB(t)
	env := testEnv(db.URL)
	base := "http://" + srv.HTTPAddr()
	ctx := context.Background()
	var pid int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO providers (name, channel_type, base_url) VALUES ('bad/name', 'alpha', 'https://u.example')
		RETURNING id`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var st snapshotStatus
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code := getJSON(t, base+"/admin/snapshot-status", env("TOLLGATE_ADMIN_TOKEN"), &st); code != 200 {
			t.Fatalf("GET /admin/snapshot-status = %d", code)
		}
		if st.Failing || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !st.Failing || st.Rejected == nil || len(st.Rejected.Problems) != 1 {
		t.Fatalf("status = %+v, want failing with one problem", st)
	}
	if p := st.Rejected.Problems[0]; p.Resource != "provider" || p.ID != pid || p.Field != "name" {
		t.Errorf("problem = %+v, want provider %d field name", p, pid)
	}
	var ready struct {
		Status   string         `json:"status"`
		Snapshot snapshotStatus `json:"snapshot"`
	}
	if code := getJSON(t, base+"/readyz", "", &ready); code != 200 || ready.Status != "degraded" || !ready.Snapshot.Failing {
		t.Errorf("/readyz = %d %+v, want 200 degraded naming the failure", code, ready)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), "tollgate_snapshot_compile_failing 1\n") {
		t.Errorf("metrics lack tollgate_snapshot_compile_failing 1")
	}
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+env("TOLLGATE_ADMIN_TOKEN"))
	gs, err := adminv1.NewAdminServiceClient(conn).GetSnapshotStatus(gctx, &adminv1.GetSnapshotStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !gs.GetFailing() || len(gs.GetRejected().GetProblems()) != 1 || gs.GetRejected().GetProblems()[0].GetId() != pid {
		t.Errorf("gRPC status = %v, want failing naming provider %d", gs, pid)
	}

	if _, err := db.Pool.Exec(ctx, `UPDATE providers SET name = 'fixed' WHERE id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	for deadline = time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		getJSON(t, base+"/admin/snapshot-status", env("TOLLGATE_ADMIN_TOKEN"), &st)
		if !st.Failing || time.Now().After(deadline) {
			break
		}
	}
	if st.Failing {
		t.Fatalf("still failing after the fix: %+v", st)
	}
	if code := getJSON(t, base+"/readyz", "", &ready); code != 200 || ready.Status != "ready" {
		t.Errorf("/readyz after the fix = %d %+v, want ready", code, ready)
	}
}
