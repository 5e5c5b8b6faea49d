package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/outpost-dev/outpost/usage"
)

// A model call's usage is read from its response (see the package doc).
// When that usage does not come whole — the response was cut before its
// closing usage (by the lease hanging up, the turn ending, or the
// upstream), or it carried none (a Chat stream without include_usage, a
// compressed body) — the upstream has billed the call all the same, so the
// budget is charged an estimate instead: what was measured, with the
// input counted as one token per two bytes of the request body when no
// input was measured, and the output as one token per four bytes of the
// response that passed (event framing makes that several times the real
// count). The estimate is priced by the grant's PriceFunc for the model
// the response named, else the one the request named. A response that
// ended with an error event, or never started, is not charged.
const (
	estimateRequestBytesPerToken  = 2
	estimateResponseBytesPerToken = 4
	// maxRequestHead bounds the part of a request body kept to find the
	// model it names.
	maxRequestHead = 64 << 10
)

// estimate is the usage a model call is charged when its own did not come
// whole: m's, with input and output raised to the byte-based bounds.
func estimate(m measure, requestBytes int64) usage.Usage {
	u := m.usage
	if u.Input+u.Cached+u.CacheCreated == 0 {
		u.Input = ceilDiv(requestBytes, estimateRequestBytesPerToken)
	}
	u.Output = max(u.Output, ceilDiv(m.bytes, estimateResponseBytesPerToken))
	u.Complete = false
	return u
}

func ceilDiv(n, d int64) int64 { return (n + d - 1) / d }

// requestMeter counts a request body's bytes as the proxy sends them
// upstream and keeps its first maxRequestHead bytes, where a model API
// request names its model.
type requestMeter struct {
	rc   io.ReadCloser
	mu   sync.Mutex
	n    int64
	head []byte
}

func (r *requestMeter) Read(b []byte) (int, error) {
	n, err := r.rc.Read(b)
	if n > 0 {
		r.mu.Lock()
		r.n += int64(n)
		if keep := min(n, maxRequestHead-len(r.head)); keep > 0 {
			r.head = append(r.head, b[:keep]...)
		}
		r.mu.Unlock()
	}
	return n, err
}

func (r *requestMeter) Close() error { return r.rc.Close() }

// read returns the bytes sent so far and the model the body names at its
// top level ("" when its first maxRequestHead bytes do not say).
func (r *requestMeter) read() (int64, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, requestModel(r.head)
}

// requestModel is the "model" member of the JSON object head starts, when
// head holds it whole.
func requestModel(head []byte) string {
	d := json.NewDecoder(bytes.NewReader(head))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for {
		t, err := d.Token()
		if err != nil {
			return ""
		}
		key, ok := t.(string)
		if !ok {
			return "" // the object's end
		}
		if key == "model" {
			v, err := d.Token()
			s, _ := v.(string)
			if err != nil {
				return ""
			}
			return bound(s, 128)
		}
		var skip json.RawMessage
		if d.Decode(&skip) != nil {
			return ""
		}
	}
}
