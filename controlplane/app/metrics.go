package app

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// quotaCollector reports every quota's spend at scrape time from the quotas table (the control plane is
// the authority for cost_used): budget burn per scope, labelled by the scope and its id (configuration,
// so bounded). A database that does not answer within quotaScrapeTimeout reports
// tollgate_quota_scrape_error 1 and no quota series.
type quotaCollector struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

const quotaScrapeTimeout = 2 * time.Second

var (
	quotaUsedDesc = prometheus.NewDesc("tollgate_quota_used_microdollars",
		"Settled spend of a quota scope in micro-dollars (cost_used).", []string{"scope", "id"}, nil)
	quotaLimitDesc = prometheus.NewDesc("tollgate_quota_limit_microdollars",
		"Spend limit of a quota scope in micro-dollars (only for limited scopes).", []string{"scope", "id"}, nil)
	quotaRatioDesc = prometheus.NewDesc("tollgate_quota_used_ratio",
		"Budget burn: cost_used / cost_limit of a limited quota scope (1 or more: exhausted).", []string{"scope", "id"}, nil)
	quotaErrDesc = prometheus.NewDesc("tollgate_quota_scrape_error",
		"1 when the last scrape could not read the quotas table.", nil, nil)
)

func newQuotaCollector(pool *pgxpool.Pool, log *slog.Logger) quotaCollector {
	return quotaCollector{pool: pool, log: log}
}

func (c quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- quotaUsedDesc
	ch <- quotaLimitDesc
	ch <- quotaRatioDesc
	ch <- quotaErrDesc
}

func (c quotaCollector) Collect(ch chan<- prometheus.Metric) {
	failed := 0.0
	if err := c.collect(ch); err != nil {
		c.log.Warn("quota metrics", "err", err)
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(quotaErrDesc, prometheus.GaugeValue, failed)
}

func (c quotaCollector) collect(ch chan<- prometheus.Metric) error {
	ctx, cancel := context.WithTimeout(context.Background(), quotaScrapeTimeout)
	defer cancel()
	// Micro-dollars are exact integers (numeric rounded in the database); a gauge carries them exactly
	// below 2^53 micro-dollars.
	rows, err := c.pool.Query(ctx, `SELECT scope, scope_id, round(cost_used * 1000000)::bigint,
		round(cost_limit * 1000000)::bigint FROM quotas ORDER BY scope, scope_id`)
	if err != nil {
		return fmt.Errorf("read quotas: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var scope string
		var id, used int64
		var limit *int64
		if err := rows.Scan(&scope, &id, &used, &limit); err != nil {
			return fmt.Errorf("read quotas: %w", err)
		}
		sid := strconv.FormatInt(id, 10)
		ch <- prometheus.MustNewConstMetric(quotaUsedDesc, prometheus.GaugeValue, float64(used), scope, sid)
		if limit != nil {
			ch <- prometheus.MustNewConstMetric(quotaLimitDesc, prometheus.GaugeValue, float64(*limit), scope, sid)
			ratio := 1.0
			if *limit > 0 {
				ratio = float64(used) / float64(*limit)
			} else if used == 0 {
				ratio = 0
			}
			ch <- prometheus.MustNewConstMetric(quotaRatioDesc, prometheus.GaugeValue, ratio, scope, sid)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read quotas: %w", err)
	}
	return nil
}
