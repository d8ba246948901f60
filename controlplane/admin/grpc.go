package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

// ServiceName is the full gRPC name of AdminService; MethodPrefix prefixes its full method names.
const (
	ServiceName  = "tollgate.admin.v1.AdminService"
	MethodPrefix = "/" + ServiceName + "/"
)

// grpcCodes maps error codes to gRPC codes; used only here, at the gRPC boundary.
var grpcCodes = map[Code]codes.Code{
	CodeInvalid:          codes.InvalidArgument,
	CodeValidation:       codes.InvalidArgument,
	CodeUnauthenticated:  codes.Unauthenticated,
	CodePermissionDenied: codes.PermissionDenied,
	CodeNotFound:         codes.NotFound,
	CodeConflict:         codes.AlreadyExists,
	CodeInUse:            codes.FailedPrecondition,
	CodeTooLarge:         codes.ResourceExhausted,
	CodeInternal:         codes.Internal,
}

// AuthorizeGRPC checks the "authorization: Bearer <token>" metadata of an AdminService call: each
// method needs the role its operation declares (operations.go), an undeclared one the admin role. It
// returns a gRPC status error. It is the authorizer app.Server.AuthorizeService installs for ServiceName.
func (s *Service) AuthorizeGRPC(ctx context.Context, fullMethod string) error {
	var header string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			header = v[0]
		}
	}
	if _, err := s.authorize(ctx, header, grpcRole(strings.TrimPrefix(fullMethod, MethodPrefix))); err != nil {
		return s.grpcError(fullMethod, err)
	}
	return nil
}

// UnaryInterceptor authorizes AdminService calls (only those: other services on the same server
// keep their own checks) for servers that do not use app.Server's authorizer table.
func (s *Service) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if strings.HasPrefix(info.FullMethod, MethodPrefix) {
			if err := s.AuthorizeGRPC(ctx, info.FullMethod); err != nil {
				return nil, err
			}
		}
		return h(ctx, req)
	}
}

// ActorInterceptor names the caller of every AdminService call (authorized already, by AuthorizeGRPC
// or UnaryInterceptor) in its context, as the REST endpoint does, so the changes it makes — also its
// single statements outside a transaction — are recorded as the caller's in the audit log.
func (s *Service) ActorInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !strings.HasPrefix(info.FullMethod, MethodPrefix) || grpcRole(strings.TrimPrefix(info.FullMethod, MethodPrefix)) == RoleViewer {
		return handler(ctx, req) // reads change nothing: no second token lookup
	}
	p, ok, err := s.caller(ctx)
	if err != nil {
		return nil, s.grpcError(info.FullMethod, err)
	}
	if ok {
		ctx = WithPrincipal(ctx, p)
	}
	return handler(ctx, req)
}

// grpcError turns a service error into a status with error details: BadRequest field violations
// for invalid input, PreconditionFailure violations naming referencing resources.
func (s *Service) grpcError(method string, err error) error {
	if err == nil {
		return nil
	}
	var ae *Error
	if !errors.As(err, &ae) {
		ae = &Error{Code: CodeInternal, Message: "internal error", Cause: err}
	}
	code, ok := grpcCodes[ae.Code]
	if !ok {
		code = codes.Internal
	}
	if code == codes.Internal {
		s.log.Error("admin rpc failed", "method", method, "err", err)
	}
	msg := ae.Message
	for _, d := range ae.Details {
		msg += "; " + detailPath(d) + d.Message
	}
	st := status.New(code, msg)
	var detail protoadapt.MessageV1
	switch {
	case len(ae.Details) > 0 && ae.Code == CodeInUse:
		pf := &errdetails.PreconditionFailure{}
		for _, d := range ae.Details {
			pf.Violations = append(pf.Violations, &errdetails.PreconditionFailure_Violation{
				Type: "REFERENCED_BY", Subject: fmt.Sprintf("%s/%d", d.Resource, d.ID), Description: d.Message})
		}
		detail = pf
	case len(ae.Details) > 0:
		br := &errdetails.BadRequest{}
		for _, d := range ae.Details {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
				Field: strings.TrimSuffix(detailPath(d), ": "), Description: d.Message})
		}
		detail = br
	}
	if detail != nil {
		if withDetails, err := st.WithDetails(detail); err == nil {
			st = withDetails
		}
	}
	return st.Err()
}

// detailPath renders where a detail points: "price_rules[3].pricing_tiers_json[0].multiplier: ".
func detailPath(d Detail) string {
	var b strings.Builder
	b.WriteString(d.Section)
	if d.Index != nil {
		fmt.Fprintf(&b, "[%d]", *d.Index)
	}
	if d.TierIndex != nil {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		fmt.Fprintf(&b, "pricing_tiers_json[%d]", *d.TierIndex)
	}
	if d.Field != "" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(d.Field)
	}
	if b.Len() == 0 {
		return ""
	}
	return b.String() + ": "
}

// grpcServer implements AdminService over the Service.
type grpcServer struct {
	adminv1.UnimplementedAdminServiceServer
	s *Service
}

// NewGRPC returns the AdminService implementation backed by s. Register it with
// adminv1.RegisterAdminServiceServer and authorize it with AuthorizeGRPC (or UnaryInterceptor).
func NewGRPC(s *Service) adminv1.AdminServiceServer { return &grpcServer{s: s} }

func (g *grpcServer) err(ctx context.Context, err error) error {
	method, _ := grpc.Method(ctx)
	return g.s.grpcError(method, err)
}

// --- conversions shared by the resources' gRPC methods (each resource's own are in its <resource>_grpc.go) ---

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func optTimestamp(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}
