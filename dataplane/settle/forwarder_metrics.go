package settle

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// outboxCollector reports the outbox at scrape time, in one Redis round trip: its length and the age of
// its oldest entry (settled entries are deleted, so the oldest one left is the delivery lag; an entry id
// is its append time in milliseconds). A Redis that does not answer within RedisTimeout reports -1.
type outboxCollector struct{ f *Forwarder }

var (
	outboxLenDesc = prometheus.NewDesc("tollgate_settle_outbox_length", "Entries in the settlement outbox stream (-1: Redis did not answer).", nil, nil)
	outboxLagDesc = prometheus.NewDesc("tollgate_settle_outbox_lag_seconds",
		"Age of the oldest settlement record not yet delivered to the control plane (0: the outbox is empty; -1: Redis did not answer).", nil, nil)
)

func (c outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- outboxLenDesc
	ch <- outboxLagDesc
}

func (c outboxCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.f
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.RedisTimeout)
	defer cancel()
	// Every shard's stream: the total length, and the age of the oldest entry of any.
	pipe := f.rdb.Pipeline()
	lens := make([]*redis.IntCmd, len(f.outboxes))
	firsts := make([]*redis.XMessageSliceCmd, len(f.outboxes))
	for i, o := range f.outboxes {
		lens[i] = pipe.XLen(ctx, o.name)
		firsts[i] = pipe.XRangeN(ctx, o.name, "-", "+", 1)
	}
	length, lag := -1.0, -1.0
	if _, err := pipe.Exec(ctx); err == nil {
		length, lag = 0, 0
		for i := range f.outboxes {
			length += float64(lens[i].Val())
			if msgs := firsts[i].Val(); len(msgs) > 0 {
				if ms, _, ok := strings.Cut(msgs[0].ID, "-"); ok {
					if v, err := strconv.ParseInt(ms, 10, 64); err == nil {
						lag = max(lag, time.Since(time.UnixMilli(v)).Seconds())
					}
				}
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(outboxLenDesc, prometheus.GaugeValue, length)
	ch <- prometheus.MustNewConstMetric(outboxLagDesc, prometheus.GaugeValue, lag)
}
