// Package watch serves SnapshotService.Watch: it holds the latest published snapshot and streams it to
// data planes. A watch is answered at once when the caller's known version differs from the latest
// (versions are compared for equality, as in envoyproxy/go-control-plane's simple cache), then receives
// every newer snapshot. Each watcher has a capacity-1 slot that a publish overwrites, so latest wins: a
// slow data plane skips intermediate versions, and a publish never waits for any stream. The service
// requires a data-plane token with the scope snapshot:read (controlplane/dptoken, installed by the control
// plane's app; AuthOptions for a single static token) and runs on the control plane's gRPC server, with TLS
// when that server has it. Each stream remembers its token, so revoking it closes the stream (CloseToken).
//
// A published version is marshalled once, by the first stream that sends it, into a grpc.PreparedMsg
// that every other stream sends as is (per wire format: a stream whose caller asked for compression gets
// its own encoding), so the control plane's cost of a version does not grow with the number of streams
// beyond the transport's copy.
//
// A stream whose data plane accepts deltas (WatchRequest.accept_deltas) gets, instead of a whole
// snapshot, the delta from the version it holds to the latest, when the history of published deltas
// (PublishDelta) reaches it and it is smaller; the delta for a pair of versions is combined and encoded
// once, shared by every stream (docs/snapshots.md, "Deltas").
package watch

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	snapshotv1 "github.com/tollgate/tollgate/shared/gen/tollgate/snapshot/v1"
)

// Server implements snapshotv1.SnapshotServiceServer. The zero value is not usable; call New.
type Server struct {
	snapshotv1.UnimplementedSnapshotServiceServer

	log      *slog.Logger
	identify Identify
	latest   atomic.Pointer[published]

	mu       sync.Mutex // serialises Publish and watcher registration
	watchers map[*watcher]struct{}
	// history holds the latest published deltas, consecutive (each one's base the previous one's
	// version) and ending at the latest version; a whole-snapshot publish empties it. Guarded by mu.
	history      []step
	historyBytes int // encoded size of history's deltas

	closeOnce sync.Once
	closed    chan struct{}

	watching prometheus.Gauge
	sends    *prometheus.CounterVec
	encodes  prometheus.Counter
	version  prometheus.Gauge
}

// MaxDeltaHistory and MaxDeltaHistoryBytes bound the published deltas a server keeps (the latest one is
// always kept) to answer a data plane holding an older version with one combined delta; a data plane
// further behind gets a whole snapshot.
const (
	MaxDeltaHistory      = 256
	MaxDeltaHistoryBytes = 64 << 20
)

// published is one published version: the snapshot, its encoding, and the deltas to it from the
// versions data planes hold, each made by the first stream that needs it and shared by every other.
type published struct {
	snap *snapshotv1.Snapshot
	full *wire

	sizeOnce sync.Once
	size     int // encoded size of the whole snapshot, for the "delta no larger" rule

	fromMu sync.Mutex // held while a delta is combined, so streams wanting the same one wait for it
	from   map[int64]*wire
}

// wire is one message for the wire and its encodings, made by the first stream that sends it and shared
// by every other stream of the same wire format.
type wire struct {
	resp    *snapshotv1.WatchResponse
	kind    string // "full" or "delta", the label of tollgate_snapshot_sends_total
	version int64

	mu      sync.Mutex // held while encoding, so streams wanting the same encoding wait for it
	encoded map[string]*grpc.PreparedMsg
}

func newPublished(snap *snapshotv1.Snapshot) *published {
	return &published{snap: snap, full: &wire{resp: &snapshotv1.WatchResponse{Snapshot: snap}, kind: "full", version: snap.GetVersion()}}
}

// minKeyBytes is the least a key adds to an encoded snapshot (its 32-byte hash, tag and length).
const minKeyBytes = 34

func (p *published) fullSize() int {
	p.sizeOnce.Do(func() { p.size = proto.Size(p.full.resp) })
	return p.size
}

// watcher is one open Watch stream. slot holds at most the newest snapshot not yet sent; tokenID is the
// credential it was opened with, and revoked is closed (once, under Server.mu) when that is revoked.
// deltas is set when the data plane can apply deltas.
type watcher struct {
	deltas  bool
	slot    chan *published
	tokenID int64
	revoked chan struct{}

	nodeID, peer string
	since        time.Time
	sentVersion  atomic.Int64 // the version the data plane holds: known on open, then each sent
	sentAt       atomic.Int64 // unix nanoseconds of the last send (0: none on this stream)
}

// DataPlane is one data plane watching this control-plane replica: who it is, since when, and which
// snapshot version it holds (data-plane freshness, GET /admin/snapshot-status).
type DataPlane struct {
	NodeID         string    `json:"node_id"`
	Peer           string    `json:"peer"`
	TokenID        int64     `json:"token_id"`
	ConnectedSince time.Time `json:"connected_since"`
	// Version is the snapshot version the data plane holds: the one it reported on opening the stream,
	// then each one sent. LastSentAt is when this replica last sent it one (nil: none on this stream).
	Version    int64      `json:"version"`
	LastSentAt *time.Time `json:"last_sent_at"`
}

// DataPlanes lists the data planes watching this replica, by node id. Each replica knows only its own
// streams; a data plane watches one replica at a time.
func (s *Server) DataPlanes() []DataPlane {
	s.mu.Lock()
	out := make([]DataPlane, 0, len(s.watchers))
	for w := range s.watchers {
		d := DataPlane{NodeID: w.nodeID, Peer: w.peer, TokenID: w.tokenID, ConnectedSince: w.since, Version: w.sentVersion.Load()}
		if at := w.sentAt.Load(); at != 0 {
			t := time.Unix(0, at).UTC()
			d.LastSentAt = &t
		}
		out = append(out, d)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b DataPlane) int {
		return cmp.Or(strings.Compare(a.NodeID, b.NodeID), a.ConnectedSince.Compare(b.ConnectedSince))
	})
	return out
}

// Identify resolves the credential of a Watch call to its token id (dptoken.Checker.Identify), so the
// stream can be closed when the token is revoked (CloseToken). It returns a gRPC status error to refuse.
type Identify func(ctx context.Context) (tokenID int64, err error)

// New returns a Server with no snapshot, registering its metrics on reg.
func New(log *slog.Logger, reg prometheus.Registerer) *Server {
	f := promauto.With(reg)
	return &Server{
		log:      log,
		watchers: map[*watcher]struct{}{},
		closed:   make(chan struct{}),
		watching: f.NewGauge(prometheus.GaugeOpts{Name: "tollgate_snapshot_watchers", Help: "Open SnapshotService.Watch streams."}),
		sends: f.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_snapshot_sends_total",
			Help: "Messages sent on Watch streams, by kind: full (a whole snapshot) or delta."}, []string{"kind"}),
		encodes: f.NewCounter(prometheus.CounterOpts{Name: "tollgate_snapshot_encodes_total",
			Help: "Snapshots and deltas marshalled for Watch streams: once per message and wire format, shared by every stream."}),
		version: f.NewGauge(prometheus.GaugeOpts{Name: "tollgate_snapshot_published_version",
			Help: "Version of the latest snapshot this control plane publishes (0 before the first)."}),
	}
}

// HeaderVersion is the response header sent when a Watch stream opens, before any snapshot: the version
// this control plane holds (0 when none). dataplane/syncer relies on it to tell an established stream.
const HeaderVersion = "tollgate-snapshot-version"

// SetIdentify makes every Watch stream resolve its credential with id, for CloseToken. Call before
// serving. Without it streams carry token id 0.
func (s *Server) SetIdentify(id Identify) { s.identify = id }

// TokenIDs returns the token ids of the open Watch streams, each once.
func (s *Server) TokenIDs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[int64]bool{}
	var out []int64
	for w := range s.watchers {
		if !seen[w.tokenID] {
			seen[w.tokenID] = true
			out = append(out, w.tokenID)
		}
	}
	return out
}

// CloseToken ends every open Watch stream opened with token id with UNAUTHENTICATED: the token was
// revoked. The data plane keeps serving its last snapshot and reconnects, refused until it has a valid
// token.
func (s *Server) CloseToken(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		if w.tokenID != id {
			continue
		}
		select {
		case <-w.revoked:
		default:
			close(w.revoked)
		}
	}
}

// Register registers s on g.
func Register(g grpc.ServiceRegistrar, s *Server) { snapshotv1.RegisterSnapshotServiceServer(g, s) }

// Publish makes snap the latest snapshot and hands it to every watcher, unless its version is not newer
// than the latest one's (it then returns false and changes nothing). It never blocks on a stream: a
// watcher that has not yet sent the previous snapshot gets it replaced. snap must not be modified after.
func (s *Server) Publish(snap *snapshotv1.Snapshot) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.latest.Load(); cur != nil && snap.GetVersion() <= cur.snap.GetVersion() {
		return false
	}
	s.history, s.historyBytes = nil, 0
	s.publish(newPublished(snap))
	return true
}

// PublishDelta is Publish for snap, the whole snapshot of d.Version, with d, the delta to it from the
// latest published version: streams that accept deltas and hold that version (or one d's predecessors
// reach, up to MaxDeltaHistory) get a delta instead of snap. When d's base is not the latest version it
// is Publish(snap). snap and d must not be modified after.
func (s *Server) PublishDelta(snap *snapshotv1.Snapshot, d *snapshotv1.SnapshotDelta) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.latest.Load()
	if cur != nil && snap.GetVersion() <= cur.snap.GetVersion() {
		return false
	}
	if cur == nil || d.GetBaseVersion() != cur.snap.GetVersion() || d.GetVersion() != snap.GetVersion() {
		s.history, s.historyBytes = nil, 0
	} else {
		st := newStep(cur.snap, d)
		s.history = append(s.history, st)
		s.historyBytes += st.size
		n := 0
		for len(s.history)-n > 1 && (len(s.history)-n > MaxDeltaHistory || s.historyBytes > MaxDeltaHistoryBytes) {
			s.historyBytes -= s.history[n].size
			n++
		}
		s.history = slices.Delete(s.history, 0, n)
	}
	s.publish(newPublished(snap))
	return true
}

// publish makes p the latest and hands it to every watcher; s.mu is held.
func (s *Server) publish(p *published) {
	snap := p.snap
	s.latest.Store(p)
	for w := range s.watchers {
		// Only this goroutine (under mu) sends to slots and the watcher only receives, so after the
		// drain the send always succeeds.
		select {
		case <-w.slot:
		default:
		}
		w.slot <- p
	}
	s.version.Set(float64(snap.GetVersion()))
}

// delta returns the delta message from version base to p's version, combined from the history and
// shared by every stream asking for the same pair, or nil when there is none or it would not be smaller
// than the whole snapshot: the stream then sends the whole snapshot.
func (s *Server) delta(p *published, base int64) *wire {
	p.fromMu.Lock()
	defer p.fromMu.Unlock()
	if w, ok := p.from[base]; ok {
		return w
	}
	var w *wire
	if chain := s.chain(base, p.snap.GetVersion()); chain != nil {
		resp := &snapshotv1.WatchResponse{Delta: compose(chain)}
		// Every key of a snapshot carries at least its 32-byte hash with tag and length: a delta below
		// that bound is smaller without sizing the whole snapshot (at a million keys, tens of
		// milliseconds per version).
		if size := proto.Size(resp); size < minKeyBytes*len(p.snap.GetApiKeys()) || size < p.fullSize() {
			w = &wire{resp: resp, kind: "delta", version: p.snap.GetVersion()}
		}
	}
	if p.from == nil {
		p.from = map[int64]*wire{}
	}
	p.from[base] = w
	return w
}

// chain returns the steps of the history leading from base to version, or nil when the history does
// not hold them.
func (s *Server) chain(base, version int64) []step {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, to := -1, -1
	for i, st := range s.history {
		if st.d.GetBaseVersion() == base {
			from = i
		}
		if st.d.GetVersion() == version {
			to = i
		}
	}
	if from < 0 || to < from {
		return nil
	}
	return slices.Clone(s.history[from : to+1])
}

// Latest returns the latest published snapshot, or nil before the first.
func (s *Server) Latest() *snapshotv1.Snapshot {
	if p := s.latest.Load(); p != nil {
		return p.snap
	}
	return nil
}

// Watchers returns the number of open Watch streams.
func (s *Server) Watchers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watchers)
}

// Shutdown ends every Watch stream with UNAVAILABLE and refuses new ones, so a graceful gRPC stop does
// not wait for streams that never end on their own; data planes reconnect to another replica.
func (s *Server) Shutdown() { s.closeOnce.Do(func() { close(s.closed) }) }

// Watch implements SnapshotService.Watch.
func (s *Server) Watch(req *snapshotv1.WatchRequest, stream grpc.ServerStreamingServer[snapshotv1.WatchResponse]) error {
	ctx := stream.Context()
	w := &watcher{slot: make(chan *published, 1), revoked: make(chan struct{}), nodeID: req.GetNodeId(),
		peer: peerAddr(ctx), since: time.Now().UTC(), deltas: req.GetAcceptDeltas()}
	w.sentVersion.Store(req.GetKnownVersion())
	if s.identify != nil {
		id, err := s.identify(ctx)
		if err != nil {
			return err
		}
		w.tokenID = id
	}
	s.mu.Lock()
	select {
	case <-s.closed:
		s.mu.Unlock()
		return status.Error(codes.Unavailable, "control plane shutting down")
	default:
	}
	s.watchers[w] = struct{}{}
	s.watching.Set(float64(len(s.watchers)))
	// Read the latest under mu: every later publish lands in the slot, so nothing is missed.
	cur := s.latest.Load()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, w)
		s.watching.Set(float64(len(s.watchers)))
		s.mu.Unlock()
	}()

	log := s.log.With("node_id", req.GetNodeId(), "peer", peerAddr(ctx), "token_id", w.tokenID)
	log.Info("watch opened", "known_version", req.GetKnownVersion(), "accept_deltas", req.GetAcceptDeltas(),
		"want_full", req.GetWantFull())
	// Answer with headers at once, so the data plane knows the stream is established even when no
	// snapshot follows (it already holds the latest).
	var curVersion int64
	if cur != nil {
		curVersion = cur.snap.GetVersion()
	}
	if err := stream.SendHeader(metadata.Pairs(HeaderVersion, strconv.FormatInt(curVersion, 10))); err != nil {
		return err
	}
	sent := req.GetKnownVersion()
	// needFull: the next message must be a whole snapshot (the data plane holds nothing, or doubts what
	// it holds).
	needFull := !w.deltas || sent == 0 || req.GetWantFull()
	if cur != nil && (curVersion != sent || req.GetWantFull()) {
		if err := s.send(stream, w, cur, sent, needFull); err != nil {
			log.Info("watch closed", "err", err)
			return err
		}
		sent, needFull = w.sentVersion.Load(), false
	}
	for {
		select {
		case <-ctx.Done():
			log.Info("watch closed", "reason", context.Cause(ctx), "sent_version", sent)
			return status.FromContextError(ctx.Err()).Err()
		case <-s.closed:
			log.Info("watch closed by shutdown", "sent_version", sent)
			return status.Error(codes.Unavailable, "control plane shutting down")
		case <-w.revoked:
			log.Warn("watch closed: data-plane token revoked", "sent_version", sent)
			return status.Error(codes.Unauthenticated, "data-plane token revoked")
		case p := <-w.slot:
			if p.snap.GetVersion() == sent {
				continue
			}
			if err := s.send(stream, w, p, sent, needFull); err != nil {
				log.Info("watch closed", "err", err, "sent_version", sent)
				return err
			}
			sent, needFull = w.sentVersion.Load(), false
		}
	}
}

// send sends p to a data plane holding version held: a delta when the stream accepts them, needFull is
// false and the history has one from held (no larger than the snapshot), else the whole snapshot. A
// data plane holding a version newer than p (this replica lags) is sent nothing: a whole older snapshot
// would be ignored, and no delta can name its state; it gets the first delta or snapshot after it.
func (s *Server) send(stream grpc.ServerStreamingServer[snapshotv1.WatchResponse], w *watcher, p *published, held int64, needFull bool) error {
	m := p.full
	if w.deltas && !needFull {
		if held > p.snap.GetVersion() {
			return nil
		}
		if d := s.delta(p, held); d != nil {
			m = d
		}
	}
	msg, err := s.prepared(stream, m)
	if err != nil {
		return err
	}
	if err := stream.SendMsg(msg); err != nil {
		return err // already a gRPC status from the transport
	}
	w.sentVersion.Store(m.version)
	w.sentAt.Store(time.Now().UnixNano())
	s.sends.WithLabelValues(m.kind).Inc()
	return nil
}

// prepared returns the message that carries p on stream: p's encoding for the stream's wire format,
// made now if it is the first stream of that format to send p. A stream whose wire format cannot be told
// gets the plain message, marshalled by the stream itself.
func (s *Server) prepared(stream grpc.ServerStream, p *wire) (any, error) {
	format, ok := wireFormat(stream.Context())
	if !ok {
		s.encodes.Inc()
		return p.resp, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if msg := p.encoded[format]; msg != nil {
		return msg, nil
	}
	msg := &grpc.PreparedMsg{}
	if err := msg.Encode(stream, p.resp); err != nil {
		return nil, status.Errorf(codes.Internal, "encode %s %d: %v", p.kind, p.version, err)
	}
	s.encodes.Inc()
	if p.encoded == nil {
		p.encoded = map[string]*grpc.PreparedMsg{}
	}
	p.encoded[format] = msg
	return msg, nil
}

// wireFormat names what a PreparedMsg made on the stream of ctx depends on: the codec (content subtype)
// and the compressor the server chose for its responses (the one the caller compressed its request
// with, if registered). Two streams of the same format can send each other's PreparedMsg. grpc's server
// transport stream has both; ok is false when the stream does not say.
func wireFormat(ctx context.Context) (format string, ok bool) {
	st, ok := grpc.ServerTransportStreamFromContext(ctx).(interface {
		ContentSubtype() string
		SendCompress() string
	})
	if !ok {
		return "", false
	}
	return st.ContentSubtype() + "\x00" + st.SendCompress(), true
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
