package app

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tollgate/tollgate/controlplane/store/storetest"
	"github.com/tollgate/tollgate/shared/testkit"
)

// rawCodec sends pre-encoded bytes as they are, so the client does not allocate per message.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "tollgate-raw-test" }

var _ encoding.Codec = rawCodec{}

func startServer(t *testing.T) *Server {
	t.Helper()
	srv, _ := startServerDB(t)
	return srv
}

func startServerDB(t *testing.T) (*Server, *storetest.DB) {
	t.Helper()
	db := storetest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := newFromEnv(ctx, testEnv(db.URL), &testkit.Buffer{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return srv, db
}

// An unauthenticated call is refused from its headers: the refusal arrives although the client has not
// sent the request message at all (before this, the server waited for the whole message, decoded it, and
// only then ran the credential check).
func TestUnauthenticatedGRPCRefusedBeforeTheMessage(t *testing.T) {
	srv := startServer(t)
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, method := range []string{
		"/tollgate.settlement.v1.SettlementService/Settle",
		"/tollgate.admin.v1.AdminService/Import",
		"/tollgate.snapshot.v1.SnapshotService/Watch",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method,
			grpc.ForceCodecV2(nil), grpc.ForceCodec(rawCodec{}))
		if err != nil {
			cancel()
			t.Fatalf("%s: open stream: %v", method, err)
		}
		// Nothing is sent: not the message, not the end of the stream.
		var out []byte
		err = st.RecvMsg(&out)
		cancel()
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s without credentials and without a message: %v, want Unauthenticated at once", method, err)
		}
	}
}

// Three 60 MB unauthenticated Settle messages are refused without being read into memory: the server
// allocates far less than one message for all three (the client sends from one preallocated buffer).
func TestLargeUnauthenticatedGRPCMessagesAreNotRead(t *testing.T) {
	srv := startServer(t)
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(128<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A well-formed SettleRequest: one record (field 2) whose request_id is 60 MB.
	rec := protowire.AppendTag(nil, 1, protowire.BytesType)
	rec = protowire.AppendBytes(rec, bytes.Repeat([]byte("a"), 60<<20))
	payload := protowire.AppendTag(nil, 2, protowire.BytesType)
	payload = protowire.AppendBytes(payload, rec)
	rec = nil
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out []byte
		err := conn.Invoke(ctx, "/tollgate.settlement.v1.SettlementService/Settle", &payload, &out, grpc.ForceCodec(rawCodec{}))
		cancel()
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("60 MB Settle without credentials: %v, want Unauthenticated", err)
		}
	}
	runtime.ReadMemStats(&after)
	t.Logf("three unauthenticated 60 MB Settle calls: %d MB allocated in the process", (after.TotalAlloc-before.TotalAlloc)>>20)
	if got := after.TotalAlloc - before.TotalAlloc; got > 40<<20 {
		t.Fatalf("refusing three unauthenticated 60 MB messages allocated %d MB, want well under one message (40 MB)", got>>20)
	}
}
