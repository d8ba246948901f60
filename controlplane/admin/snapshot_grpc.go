package admin

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

func (g *grpcServer) GetSnapshotStatus(ctx context.Context, _ *adminv1.GetSnapshotStatusRequest) (*adminv1.GetSnapshotStatusResponse, error) {
	st, err := g.s.SnapshotStatus(ctx)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.GetSnapshotStatusResponse{PublishedVersion: st.PublishedVersion, Failing: st.Failing}
	for _, d := range st.DataPlanes {
		w := &adminv1.WatchingDataPlane{NodeId: d.NodeID, Peer: d.Peer, TokenId: d.TokenID,
			ConnectedSince: timestamppb.New(d.ConnectedSince), Version: d.Version}
		if d.LastSentAt != nil {
			w.LastSentAt = timestamppb.New(*d.LastSentAt)
		}
		out.DataPlanes = append(out.DataPlanes, w)
	}
	if r := st.Rejected; r != nil {
		out.Rejected = &adminv1.SnapshotRejection{Version: r.Version, Stage: r.Stage, At: timestamppb.New(r.At), Error: r.Error}
		for _, p := range r.Problems {
			out.Rejected.Problems = append(out.Rejected.Problems, &adminv1.SnapshotProblem{Resource: p.Resource, Id: p.ID,
				Name: p.Name, Field: p.Field, Message: p.Message})
		}
	}
	return out, nil
}
