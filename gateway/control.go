package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/internal/lines"
	"github.com/outpost-dev/outpost/outposterr"
)

// A gateway that runs somewhere else — in a sidecar container next to a
// Kubernetes lease, sharing the pod's loopback but none of its files or
// processes — is driven over a pair of streams (the sidecar program's
// standard input and output, carried by the API server's exec): the runner
// opens, measures and revokes grants there with a [Remote], and the real
// credential crosses only that channel, never the lease's environment, its
// files or the pod's spec. The protocol is one JSON object per line, each
// request answered by one reply with the same id; the gateway announces
// itself first with the base URLs it serves.

// maxControlLine bounds one message of the control protocol (a snapshot of
// a long turn is the largest).
const maxControlLine = 64 << 20

// controlTimeout bounds a Remote's wait for one reply.
const controlTimeout = 30 * time.Second

type controlRequest struct {
	ID    int64  `json:"id"`
	Op    string `json:"op"` // grant, snapshot, revoke
	Grant string `json:"grant,omitempty"`
	// For grant:
	Label    string `json:"label,omitempty"`
	Upstream string `json:"upstream,omitempty"`
	Scheme   Scheme `json:"scheme,omitempty"`
	Secret   string `json:"secret,omitempty"`
	// Caps, when set, give the grant a budget of its own on the remote
	// gateway, priced at list prices (ListPrice).
	Caps *Caps `json:"caps,omitempty"`
}

type controlReply struct {
	ID int64 `json:"id"`
	// Hello is the gateway's first message; Ready lists its base URLs.
	Hello       bool      `json:"hello,omitempty"`
	Ready       []string  `json:"ready,omitempty"`
	Grant       string    `json:"grant,omitempty"`
	Placeholder string    `json:"placeholder,omitempty"`
	Snapshot    *Snapshot `json:"snapshot,omitempty"`
	Error       string    `json:"error,omitempty"`
	// Exhausted, unasked (ID 0), names a grant whose budget refused a
	// request.
	Exhausted string `json:"exhausted,omitempty"`
}

// ServeControl lets a [Remote] on the other end of r and w drive the
// gateway: it first writes the base URLs the gateway serves (the TCP
// listeners opened with [Gateway.ListenTCP]), then answers requests until
// r ends or ctx is done. Grants opened through it are revoked when it
// returns. Errors name the request, never the credential.
func (g *Gateway) ServeControl(ctx context.Context, r io.Reader, w io.Writer) error {
	var wmu sync.Mutex
	send := func(rep controlReply) error {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		wmu.Lock()
		defer wmu.Unlock()
		_, err = w.Write(append(b, '\n'))
		return err
	}
	if err := send(controlReply{Hello: true, Ready: g.tcpURLs()}); err != nil {
		return fmt.Errorf("gateway control: %w", err)
	}
	var (
		mu     sync.Mutex
		grants = map[string]*Grant{}
		next   int
		wg     sync.WaitGroup
	)
	defer func() {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, gr := range grants {
			gr.Revoke()
		}
	}()
	reqs := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		lr := lines.NewReader(r, maxControlLine)
		lr.OversizedAtOnce()
		for {
			line, over, err := lr.Next()
			switch {
			case errors.Is(err, io.EOF):
				readErr <- nil
				return
			case err != nil:
				readErr <- err
				return
			case over:
				readErr <- fmt.Errorf("a request over %d bytes", maxControlLine)
				return
			}
			select {
			case reqs <- append([]byte(nil), line...):
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		var line []byte
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("gateway control: read: %w", err)
			}
			return nil
		case line = <-reqs:
		}
		var req controlRequest
		if err := json.Unmarshal(line, &req); err != nil {
			if serr := send(controlReply{Error: "malformed request"}); serr != nil {
				return fmt.Errorf("gateway control: %w", serr)
			}
			continue
		}
		wg.Go(func() {
			rep := controlReply{ID: req.ID}
			switch req.Op {
			case "grant":
				spec := GrantSpec{Label: req.Label, Upstream: req.Upstream,
					Credential: Credential{Scheme: req.Scheme, Secret: req.Secret}}
				if req.Caps != nil {
					b, err := NewCapped(*req.Caps)
					if err != nil {
						rep.Error = err.Error()
						break
					}
					spec.Budget, spec.Price = b, ListPrice
				}
				gr, err := g.Grant(spec)
				if err != nil {
					rep.Error = err.Error()
					break
				}
				mu.Lock()
				next++
				id := "g" + strconv.Itoa(next)
				grants[id] = gr
				mu.Unlock()
				rep.Grant, rep.Placeholder = id, gr.Placeholder()
				if spec.Budget != nil {
					// Tell the runner at once when the budget runs out, so
					// it stops the turn instead of waiting for the CLI.
					go func() {
						select {
						case <-gr.Refused():
							if err := send(controlReply{Exhausted: id}); err != nil {
								g.log.Debug("gateway control: exhausted", "err", err)
							}
						case <-gr.ctx.Done():
						}
					}()
				}
			case "snapshot", "revoke":
				mu.Lock()
				gr := grants[req.Grant]
				mu.Unlock()
				if gr == nil {
					rep.Error = "no grant " + strconv.Quote(req.Grant)
					break
				}
				if req.Op == "revoke" {
					gr.Revoke()
				}
				s := gr.Snapshot()
				rep.Snapshot = &s
			default:
				rep.Error = "unknown operation " + strconv.Quote(req.Op)
			}
			if err := send(rep); err != nil {
				g.log.Debug("gateway control: reply", "err", err)
			}
		})
	}
}

// tcpURLs lists the base URLs of the gateway's TCP listeners.
func (g *Gateway) tcpURLs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, ln := range g.listeners {
		if ln.Addr().Network() == "tcp" {
			out = append(out, "http://"+ln.Addr().String())
		}
	}
	return out
}

// Remote drives a gateway running elsewhere through [Gateway.ServeControl]
// on the other end of a pair of streams. It is safe for concurrent use.
type Remote struct {
	w    io.Writer
	wmu  sync.Mutex
	urls []string

	mu      sync.Mutex
	next    int64
	pending map[int64]chan controlReply
	grants  map[string]*RemoteGrant // open grants with a budget
	err     error                   // set when the stream ended
	ready   chan struct{}
	done    chan struct{}
}

// NewRemote starts reading the gateway's replies from r; requests go to w.
func NewRemote(r io.Reader, w io.Writer) *Remote {
	c := &Remote{w: w, pending: map[int64]chan controlReply{}, grants: map[string]*RemoteGrant{}, ready: make(chan struct{}), done: make(chan struct{})}
	go c.read(r)
	return c
}

func (c *Remote) read(r io.Reader) {
	lr := lines.NewReader(r, maxControlLine)
	hello := false
	var err error
	for {
		var line []byte
		var over bool
		if line, over, err = lr.Next(); err != nil {
			break
		}
		var rep controlReply
		if over || json.Unmarshal(line, &rep) != nil {
			continue // not ours (a diagnostic line): skip it
		}
		if !hello {
			if !rep.Hello {
				continue
			}
			hello = true
			c.urls = rep.Ready
			close(c.ready)
			continue
		}
		if rep.ID == 0 && rep.Exhausted != "" {
			c.mu.Lock()
			gr := c.grants[rep.Exhausted]
			c.mu.Unlock()
			if gr != nil {
				gr.exhaust()
			}
			continue
		}
		c.mu.Lock()
		ch := c.pending[rep.ID]
		delete(c.pending, rep.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	c.mu.Lock()
	c.err = err
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
	close(c.done)
}

// Ready waits for the gateway's announcement and returns the base URLs it
// serves.
func (c *Remote) Ready(ctx context.Context) ([]string, error) {
	select {
	case <-c.ready:
		return c.urls, nil
	case <-c.done:
		select {
		case <-c.ready:
			return c.urls, nil
		default:
		}
		return nil, outposterr.Wrap(outposterr.Sandbox, c.err, "gateway sidecar ended before it was ready")
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the gateway sidecar: %w", ctx.Err())
	}
}

// call sends req and waits for its reply.
func (c *Remote) call(ctx context.Context, req controlRequest) (controlReply, error) {
	ch := make(chan controlReply, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return controlReply{}, outposterr.Wrap(outposterr.Sandbox, err, "gateway sidecar %s", req.Op)
	}
	c.next++
	req.ID = c.next
	c.pending[req.ID] = ch
	c.mu.Unlock()
	b, err := json.Marshal(req)
	if err != nil {
		return controlReply{}, err
	}
	c.wmu.Lock()
	_, err = c.w.Write(append(b, '\n'))
	c.wmu.Unlock()
	if err != nil {
		c.forget(req.ID)
		return controlReply{}, outposterr.Wrap(outposterr.Sandbox, errors.New(scrub(err.Error(), req.Secret)), "gateway sidecar %s", req.Op)
	}
	t := time.NewTimer(controlTimeout)
	defer t.Stop()
	select {
	case rep, ok := <-ch:
		if !ok {
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return controlReply{}, outposterr.Wrap(outposterr.Sandbox, err, "gateway sidecar %s: it ended", req.Op)
		}
		if rep.Error != "" {
			return rep, outposterr.New(outposterr.Configuration, "gateway sidecar %s: %s", req.Op, scrub(rep.Error, req.Secret))
		}
		return rep, nil
	case <-t.C:
		c.forget(req.ID)
		return controlReply{}, outposterr.New(outposterr.Sandbox, "gateway sidecar %s: no reply within %s", req.Op, controlTimeout)
	case <-ctx.Done():
		c.forget(req.ID)
		return controlReply{}, fmt.Errorf("gateway sidecar %s: %w", req.Op, ctx.Err())
	}
}

func (c *Remote) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Grant opens a grant on the remote gateway. Price is not carried across:
// the remote gateway prices at list prices ([ListPrice]). A Budget is
// carried as what is left of it when the grant opens ([Budget.Remaining]):
// the remote gateway enforces that, tells the grant at once when it
// refuses a request ([RemoteGrant.Refused]), and Revoke charges what it measured to the
// Budget. Grants that share a Budget on different remote gateways each get
// what was left when they opened.
func (c *Remote) Grant(ctx context.Context, spec GrantSpec) (*RemoteGrant, error) {
	if err := spec.Credential.valid(); err != nil {
		return nil, err
	}
	req := controlRequest{Op: "grant", Label: spec.Label, Upstream: spec.Upstream,
		Scheme: spec.Credential.Scheme, Secret: spec.Credential.Secret}
	g := &RemoteGrant{c: c, label: spec.Label, scheme: spec.Credential.Scheme, budget: spec.Budget, done: make(chan struct{})}
	if spec.Budget != nil {
		left := spec.Budget.remoteCaps()
		req.Caps = &left
	}
	rep, err := c.call(ctx, req)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(rep.Placeholder, PlaceholderPrefix) || rep.Grant == "" {
		return nil, outposterr.New(outposterr.Sandbox, "gateway sidecar grant: malformed reply")
	}
	g.id, g.placeholder = rep.Grant, rep.Placeholder
	if spec.Budget != nil {
		c.mu.Lock()
		c.grants[g.id] = g
		c.mu.Unlock()
	}
	return g, nil
}

// RemoteGrant is a grant on a remote gateway: the same use as [Grant].
type RemoteGrant struct {
	c           *Remote
	id, label   string
	placeholder string
	scheme      Scheme

	budget      *Budget
	done        chan struct{} // closed when the remote budget refused a request
	exhaustOnce sync.Once

	mu    sync.Mutex
	final *Snapshot // the snapshot taken by Revoke
}

// Refused is closed when the grant's budget on the remote gateway first
// refuses a request (never, without a budget).
func (g *RemoteGrant) Refused() <-chan struct{} { return g.done }

func (g *RemoteGrant) exhaust() { g.exhaustOnce.Do(func() { close(g.done) }) }

// Placeholder returns the key the lease presents instead of the real one.
func (g *RemoteGrant) Placeholder() string { return g.placeholder }

// Endpoint is [Grant.Endpoint] for the remote grant.
func (g *RemoteGrant) Endpoint(baseURL string) *adapters.Endpoint {
	if g.scheme == SchemeClaudeOAuth {
		return &adapters.Endpoint{BaseURL: baseURL, OAuthToken: g.placeholder}
	}
	return &adapters.Endpoint{BaseURL: baseURL, APIKey: g.placeholder}
}

// Revoke revokes the grant on the remote gateway and keeps its final
// snapshot. It is idempotent; a gateway that is gone has nothing left to
// revoke.
func (g *RemoteGrant) Revoke() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.final != nil {
		return
	}
	g.c.mu.Lock()
	delete(g.c.grants, g.id)
	g.c.mu.Unlock()
	rep, err := g.c.call(context.Background(), controlRequest{Op: "revoke", Grant: g.id})
	if err != nil || rep.Snapshot == nil {
		g.final = &Snapshot{Label: g.label}
		return
	}
	g.final = rep.Snapshot
	if g.budget != nil {
		for _, e := range g.final.Exchanges {
			switch {
			case e.Estimate != nil:
				g.budget.charge(e.Estimate.CostUSD, e.Estimate.CostKnown, e.Model, e.Estimate.Tokens())
			case e.HasUsage:
				g.budget.charge(e.CostUSD, e.Priced, e.Model, e.Usage.Tokens())
			}
		}
	}
}

// Snapshot returns what the remote gateway measured for the grant (final
// after Revoke). A gateway that cannot be asked yields an empty snapshot.
func (g *RemoteGrant) Snapshot() Snapshot {
	g.mu.Lock()
	final := g.final
	g.mu.Unlock()
	if final != nil {
		return *final
	}
	rep, err := g.c.call(context.Background(), controlRequest{Op: "snapshot", Grant: g.id})
	if err != nil || rep.Snapshot == nil {
		return Snapshot{Label: g.label}
	}
	return *rep.Snapshot
}
