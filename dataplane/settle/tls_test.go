package settle_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/admission/admissiontest"
	"github.com/tollgate/tollgate/dataplane/cpclient"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/shared/tlstest"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestForwarderTLSServerName: a control plane whose certificate names only cp.internal, dialed at its
// loopback address. With ServerName cp.internal the forwarder verifies it and settles (as the syncer
// always could: the forwarder once built its own TLS without ServerName); without it the certificate
// does not match the address dialed and nothing settles.
func TestForwarderTLSServerName(t *testing.T) {
	t.Parallel()
	certFile, keyFile := tlstest.SelfSignedFor(t, "cp.internal")
	creds, err := credentials.NewServerTLSFromFile(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	db := storetest.New(t)
	cp := startControlPlane(t, db, grpc.Creds(creds))
	ctx := context.Background()
	for _, tt := range []struct {
		serverName string
		settles    bool
	}{{"cp.internal", true}, {"", false}} {
		rdb, prefix := admissiontest.Redis(t)
		f, err := settle.NewForwarder(rdb, settle.ForwarderOptions{Prefix: prefix, NodeID: "dp-tls", RPCTimeout: time.Second,
			ControlPlane: cpclient.Options{Endpoints: []string{cp.addr}, Token: dpToken, CAFile: certFile, ServerName: tt.serverName,
				BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		requestID := "tls-" + tt.serverName
		if err := settle.NewRecorder(rdb, prefix).Append(ctx, outcomeRecord(requestID, 1, 0, 3, 5, vocab.EndCompleted), admission.Hold{}); err != nil {
			t.Fatal(err)
		}
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = f.Flush(fctx)
		cancel()
		var rows int64
		if qerr := db.Pool.QueryRow(ctx, `SELECT count(*) FROM usages WHERE request_id = $1`, requestID).Scan(&rows); qerr != nil {
			t.Fatal(qerr)
		}
		if settled := err == nil && rows == 1; settled != tt.settles {
			t.Errorf("ServerName %q: settled = %v (Flush: %v, rows %d), want %v", tt.serverName, settled, err, rows, tt.settles)
		}
	}
}
