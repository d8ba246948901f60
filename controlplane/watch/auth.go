package watch

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// ServiceName is the full gRPC service name, for the control plane's per-service authorizers.
const ServiceName = "tollgate.snapshot.v1.SnapshotService"

// methodPrefix selects the calls the interceptors guard; every other service on the shared gRPC server
// (admin, health, reflection, settlement) passes through untouched and keeps its own authentication.
var methodPrefix = "/" + snapshotv1.SnapshotService_ServiceDesc.ServiceName + "/"

// Authorize returns the credential check of SnapshotService calls: the data-plane token as
// "authorization: Bearer <token>" (see CheckToken). An empty configured token refuses every call. It has
// the shape of the control plane's per-service authorizer (app.Server.AuthorizeService).
func Authorize(token string) func(ctx context.Context, fullMethod string) error {
	want := sha256.Sum256([]byte(token))
	empty := token == ""
	return func(ctx context.Context, _ string) error {
		if empty {
			return status.Error(codes.Unauthenticated, "data-plane token not configured")
		}
		return CheckToken(ctx, want)
	}
}

// AuthOptions returns server options that apply Authorize to SnapshotService calls only, for a gRPC
// server without per-service authorizers (tests, tools). They use grpc.ChainUnaryInterceptor /
// ChainStreamInterceptor, which append to the server's chains and so compose with other services' ones.
func AuthOptions(token string) []grpc.ServerOption {
	check := Authorize(token)
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if strings.HasPrefix(info.FullMethod, methodPrefix) {
				if err := check(ctx, info.FullMethod); err != nil {
					return nil, err
				}
			}
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if strings.HasPrefix(info.FullMethod, methodPrefix) {
				if err := check(ss.Context(), info.FullMethod); err != nil {
					return err
				}
			}
			return handler(srv, ss)
		}),
	}
}

// CheckToken reports whether the incoming metadata carries "authorization: Bearer <token>" whose sha256
// is want. The comparison is constant-time and, over hashes, independent of the token's length. It
// answers UNAUTHENTICATED otherwise.
func CheckToken(ctx context.Context, want [sha256.Size]byte) error {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		scheme, tok, ok := strings.Cut(v, " ")
		if !ok || !strings.EqualFold(scheme, "bearer") {
			continue
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "missing or invalid data-plane token")
}
