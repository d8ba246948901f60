package dptoken

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
)

// Streams is what holds long-lived calls per token: controlplane/watch.Server.
type Streams interface {
	// TokenIDs lists the token ids of the open streams (0, the bootstrap token, may be among them).
	TokenIDs() []int64
	// CloseToken ends every open stream of the token id.
	CloseToken(id int64)
}

// ListenerApplicationName is the application_name of the revocation LISTEN connection.
const ListenerApplicationName = "tollgate-dataplane-token-listener"

// Revocations closes the streams of revoked tokens until ctx ends: at once on a revocation's
// notification (store.DataPlaneTokenChannel, sent by every replica's revocation to all), and every
// interval by checking the open streams' tokens against the database, which covers notifications lost
// while the LISTEN connection was down. It returns nil when ctx ends.
func (c *Checker) Revocations(ctx context.Context, streams Streams, interval time.Duration, log *slog.Logger) error {
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := c.sweep(ctx, streams); err != nil && ctx.Err() == nil {
					log.Warn("data-plane token revocation check failed", "err", err)
				}
			}
		}
	}()
	for ctx.Err() == nil {
		err := c.listen(ctx, streams)
		if ctx.Err() != nil {
			break
		}
		log.Warn("data-plane token revocation listener down; relying on the periodic check until it reconnects",
			"err", err, "check_interval", interval.String())
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// sweep closes the open streams whose tokens are revoked or gone.
func (c *Checker) sweep(ctx context.Context, streams Streams) error {
	var ids []int64
	for _, id := range streams.TokenIDs() {
		if id != 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	revoked, err := store.RevokedDataPlaneTokens(ctx, c.pool, ids)
	if err != nil {
		return err
	}
	for _, id := range revoked {
		streams.CloseToken(id)
	}
	return nil
}

func (c *Checker) listen(ctx context.Context, streams Streams) error {
	cfg := c.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenerApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{store.DataPlaneTokenChannel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Revocations made while no connection listened were not heard.
	if err := c.sweep(ctx, streams); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		if id, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
			streams.CloseToken(id)
		}
	}
}
