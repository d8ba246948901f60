package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Route is a logical model name with its aliases and members inline.
type Route struct {
	ID       int64         `json:"id"`
	Name     string        `json:"name"`
	Strategy string        `json:"strategy"`
	Enabled  bool          `json:"enabled"`
	Aliases  []string      `json:"aliases"`
	Members  []RouteMember `json:"members"`
}

// RouteMember is one provider candidate of a route.
type RouteMember struct {
	ProviderID      int64  `json:"provider_id"`
	UpstreamModelID string `json:"upstream_model_id"`
	Priority        int32  `json:"priority"`
	Weight          int32  `json:"weight"`
	Enabled         bool   `json:"enabled"`
}

// InsertRoute creates a route with its aliases and members; run it in a transaction.
func InsertRoute(ctx context.Context, db DBTX, r Route) (Route, error) {
	if err := db.QueryRow(ctx, `INSERT INTO routes (name, strategy, enabled) VALUES ($1, $2, $3) RETURNING id`,
		r.Name, r.Strategy, r.Enabled).Scan(&r.ID); err != nil {
		return Route{}, fmt.Errorf("insert route %q: %w", r.Name, interpretError(err))
	}
	if err := adminWriteRouteChildren(ctx, db, r); err != nil {
		return Route{}, err
	}
	return GetRoute(ctx, db, r.ID)
}

// UpdateRoute replaces a route, its aliases and its members; run it in a transaction.
func UpdateRoute(ctx context.Context, db DBTX, r Route) (Route, error) {
	tag, err := db.Exec(ctx, `UPDATE routes SET name = $1, strategy = $2, enabled = $3, updated_at = now() WHERE id = $4`,
		r.Name, r.Strategy, r.Enabled, r.ID)
	if err != nil {
		return Route{}, fmt.Errorf("update route %d: %w", r.ID, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return Route{}, fmt.Errorf("update route %d: %w", r.ID, ErrNotFound)
	}
	if _, err := db.Exec(ctx, `DELETE FROM route_aliases WHERE route_id = $1`, r.ID); err != nil {
		return Route{}, fmt.Errorf("update route %d aliases: %w", r.ID, interpretError(err))
	}
	if _, err := db.Exec(ctx, `DELETE FROM route_members WHERE route_id = $1`, r.ID); err != nil {
		return Route{}, fmt.Errorf("update route %d members: %w", r.ID, interpretError(err))
	}
	if err := adminWriteRouteChildren(ctx, db, r); err != nil {
		return Route{}, err
	}
	return GetRoute(ctx, db, r.ID)
}

func adminWriteRouteChildren(ctx context.Context, db DBTX, r Route) error {
	if len(r.Aliases) > 0 {
		if _, err := db.Exec(ctx, `INSERT INTO route_aliases (alias, route_id) SELECT a, $2 FROM unnest($1::text[]) AS a`,
			r.Aliases, r.ID); err != nil {
			return fmt.Errorf("route %q aliases: %w", r.Name, interpretError(err))
		}
	}
	for _, m := range r.Members {
		if _, err := db.Exec(ctx, `INSERT INTO route_members (route_id, provider_id, upstream_model_id, priority, weight, enabled)
			VALUES ($1, $2, $3, $4, $5, $6)`, r.ID, m.ProviderID, m.UpstreamModelID, m.Priority, m.Weight, m.Enabled); err != nil {
			return fmt.Errorf("route %q member %d/%s: %w", r.Name, m.ProviderID, m.UpstreamModelID, interpretError(err))
		}
	}
	return nil
}

// GetRoute reads one route with aliases and members; ErrNotFound when absent.
func GetRoute(ctx context.Context, db DBTX, id int64) (Route, error) {
	routes, err := adminReadRoutes(ctx, db, `WHERE id = $1`, id)
	if err != nil {
		return Route{}, fmt.Errorf("get route %d: %w", id, err)
	}
	if len(routes) == 0 {
		return Route{}, fmt.Errorf("get route %d: %w", id, ErrNotFound)
	}
	return routes[0], nil
}

// ListRoutes returns up to limit routes with id > afterID in id order.
func ListRoutes(ctx context.Context, db DBTX, afterID int64, limit int) ([]Route, error) {
	routes, err := adminReadRoutes(ctx, db, `WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	return routes, nil
}

func adminReadRoutes(ctx context.Context, db DBTX, where string, args ...any) ([]Route, error) {
	rows, err := db.Query(ctx, `SELECT id, name, strategy, enabled FROM routes `+where, args...)
	if err != nil {
		return nil, interpretError(err)
	}
	routes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Route, error) {
		r := Route{Aliases: []string{}, Members: []RouteMember{}}
		return r, row.Scan(&r.ID, &r.Name, &r.Strategy, &r.Enabled)
	})
	if err != nil || len(routes) == 0 {
		return routes, interpretError(err)
	}
	idx := make(map[int64]int, len(routes))
	ids := make([]int64, len(routes))
	for i, r := range routes {
		idx[r.ID], ids[i] = i, r.ID
	}
	rows, err = db.Query(ctx, `SELECT route_id, alias FROM route_aliases WHERE route_id = ANY($1) ORDER BY alias`, ids)
	if err != nil {
		return nil, interpretError(err)
	}
	var routeID int64
	var alias string
	if _, err := pgx.ForEachRow(rows, []any{&routeID, &alias}, func() error {
		r := &routes[idx[routeID]]
		r.Aliases = append(r.Aliases, alias)
		return nil
	}); err != nil {
		return nil, interpretError(err)
	}
	rows, err = db.Query(ctx, `SELECT route_id, provider_id, upstream_model_id, priority, weight, enabled
		FROM route_members WHERE route_id = ANY($1) ORDER BY id`, ids)
	if err != nil {
		return nil, interpretError(err)
	}
	var m RouteMember
	if _, err := pgx.ForEachRow(rows, []any{&routeID, &m.ProviderID, &m.UpstreamModelID, &m.Priority, &m.Weight, &m.Enabled}, func() error {
		r := &routes[idx[routeID]]
		r.Members = append(r.Members, m)
		return nil
	}); err != nil {
		return nil, interpretError(err)
	}
	return routes, nil
}

// DeleteRoute deletes a route with its aliases and members; ErrNotFound when absent.
func DeleteRoute(ctx context.Context, db DBTX, id int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM routes WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete route %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete route %d: %w", id, ErrNotFound)
	}
	return nil
}
