package admin

import (
	"context"
	"strconv"

	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/tollgate/tollgate/shared/gen/tollgate/admin/v1"
)

// GetSpend is GET /admin/spend's twin: the same service call; an id filter of 0 means "none".
func (g *grpcServer) GetSpend(ctx context.Context, req *adminv1.GetSpendRequest) (*adminv1.GetSpendResponse, error) {
	in := SpendRequest{Since: timeOf(req.GetSince()), Until: timeOf(req.GetUntil()), Bucket: req.GetBucket(),
		TZ: req.GetTz(), GroupBy: req.GetGroupBy(), Top: int(req.GetTop())}
	for _, f := range req.GetFilters() {
		fi := SpendFilterInput{Dim: f.GetDimension(), Values: f.GetValues()}
		for _, id := range f.GetIds() {
			if id == 0 {
				fi.Values = append(fi.Values, "none")
			} else {
				fi.Values = append(fi.Values, strconv.FormatInt(id, 10))
			}
		}
		in.Filters = append(in.Filters, fi)
	}
	res, err := g.s.Spend(ctx, in)
	if err != nil {
		return nil, g.err(ctx, err)
	}
	out := &adminv1.GetSpendResponse{Tz: res.TZ, Rollup: res.Rollup,
		Total: &adminv1.SpendRow{BucketStart: timestamppb.New(res.Since), Requests: res.Total.Requests,
			Cost: res.Total.Cost, Tokens: spendTokensProto(res.Total)}}
	for _, r := range res.Rows {
		pr := &adminv1.SpendRow{BucketStart: timestamppb.New(r.BucketStart), Other: r.Other, Requests: r.Requests,
			Cost: r.Cost, Tokens: spendTokensProto(r.SpendTotals)}
		if !r.Other {
			for _, d := range res.GroupBy {
				gv := &adminv1.SpendGroupValue{Dimension: d}
				switch v := r.Group[d].(type) {
				case *int64:
					gv.Id = v
				case string:
					gv.Value = v
				}
				pr.Group = append(pr.Group, gv)
			}
		}
		out.Rows = append(out.Rows, pr)
	}
	return out, nil
}

func spendTokensProto(t SpendTotals) *adminv1.SpendTokens {
	k := t.Tokens
	return &adminv1.SpendTokens{Input: k.Input, Output: k.Output, CacheRead: k.CacheRead,
		CacheCreation_5M: k.CacheCreation5m, CacheCreation_30M: k.CacheCreation30m, CacheCreation_1H: k.CacheCreation1h,
		ImageOutput: k.ImageOutput}
}
