package fakecli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// LiveArg makes the fake a live-input CLI (see [Adapter.LiveRequest]).
const LiveArg = "--live"

// serveLive is the fake's live-input protocol, one JSON object per line.
// The first stdin line is {"prompt":"expect N"}. The fake prints a
// conversation event and {"type":"ask","id":7}, and waits for {"reply":7}
// before it prints {"type":"ready"} (with N = 0 it prints neither ask nor
// ready and finishes at once). Each {"say":TEXT} line prints a text event
// "heard TEXT"; after the Nth it prints the result ("heard A, B") and a
// finished event, then reads stdin to its end and exits 0, so a harness
// that never closes stdin leaves it running. "expect N hang" never finishes;
// "expect N stall" stops reading its input after N messages.
func serveLive() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	emit := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Println(string(b))
	}
	var open struct {
		Prompt string `json:"prompt"`
	}
	if !in.Scan() || json.Unmarshal(in.Bytes(), &open) != nil {
		fmt.Fprintln(os.Stderr, "fakecli: live: no opening line")
		os.Exit(98)
	}
	fields := strings.Fields(open.Prompt)
	if len(fields) < 2 || fields[0] != "expect" {
		fmt.Fprintln(os.Stderr, "fakecli: live: prompt must be \"expect N\"")
		os.Exit(98)
	}
	n, _ := strconv.Atoi(fields[1])
	hang := len(fields) > 2 && fields[2] == "hang"
	stall := len(fields) > 2 && fields[2] == "stall" // stop reading input after n messages
	emit(map[string]any{"type": "conversation", "id": "live-1"})
	var heard []string
	finish := func() {
		emit(map[string]any{"type": "result", "text": "heard " + strings.Join(heard, ", ")})
		emit(map[string]any{"type": "finished", "ok": true})
		for in.Scan() {
		}
		os.Exit(0)
	}
	if n == 0 && !hang {
		finish()
	}
	emit(map[string]any{"type": "ask", "id": 7})
	ready := false
	for in.Scan() {
		var m struct {
			Reply *int   `json:"reply"`
			Say   string `json:"say"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil {
			fmt.Fprintln(os.Stderr, "fakecli: live: bad line", in.Text())
			os.Exit(97)
		}
		switch {
		case m.Reply != nil && *m.Reply == 7 && !ready:
			ready = true
			emit(map[string]any{"type": "ready"})
		case m.Say != "" && ready:
			heard = append(heard, m.Say)
			emit(map[string]any{"type": "text", "text": "heard " + m.Say})
			if len(heard) == n && stall {
				select {}
			}
			if len(heard) == n && !hang {
				finish()
			}
		default:
			fmt.Fprintln(os.Stderr, "fakecli: live: unexpected line", in.Text())
			os.Exit(97)
		}
	}
	os.Exit(0)
}

var _ adapters.LiveInput = (*Adapter)(nil)

// LiveRequest implements adapters.LiveInput: the fake runs its live
// protocol; the prompt is "expect N" (see serveLive).
func (a *Adapter) LiveRequest(in adapters.Input) (sandbox.Command, adapters.LiveSession, error) {
	cmd, err := a.Request(in)
	if err != nil {
		return sandbox.Command{}, nil, err
	}
	open, _ := json.Marshal(map[string]string{"prompt": in.Prompt})
	cmd.Args = append(cmd.Args, LiveArg)
	cmd.Stdin = append(open, '\n')
	cmd.KeepStdinOpen = true
	return cmd, &liveSession{}, nil
}

// liveSession speaks the fake's live protocol.
type liveSession struct {
	decoder
	pending     []byte
	ready, done bool
}

func (s *liveSession) Decode(b []byte) []adapters.Event {
	var l struct {
		Type string `json:"type"`
		ID   int    `json:"id"`
	}
	_ = json.Unmarshal(b, &l)
	switch l.Type {
	case "ask":
		s.pending = append(s.pending, fmt.Sprintf("{\"reply\":%d}\n", l.ID)...)
	case "ready":
		s.ready = true
	case "finished":
		s.done = true
	}
	return s.decoder.Decode(b)
}

func (s *liveSession) Pending() []byte {
	p := s.pending
	s.pending = nil
	return p
}

func (s *liveSession) Ready() bool { return s.ready && !s.done }

func (s *liveSession) Done() bool { return s.done }

func (s *liveSession) EncodeInput(text string) ([]byte, error) {
	if !s.Ready() {
		return nil, outposterr.New(outposterr.Configuration, "fake: no running turn")
	}
	b, _ := json.Marshal(map[string]string{"say": text})
	return append(b, '\n'), nil
}
