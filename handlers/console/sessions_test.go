package console_test

import (
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-dev/corral/backends"
)

// countingHook records the open consoles per instance as the VDI broker
// counts them.
type countingHook struct {
	mu     sync.Mutex
	open   map[string]int
	events []string
}

func (h *countingHook) ConsoleOpened(ref backends.InstanceRef) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open[ref.String()]++
	h.events = append(h.events, "open "+ref.String())
}

func (h *countingHook) ConsoleClosed(ref backends.InstanceRef) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open[ref.String()]--
	h.events = append(h.events, "close "+ref.String())
}

func (h *countingHook) count(ref string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open[ref]
}

// waitCount waits until the hook saw n open consoles of ref: the close
// is reported when the bridge notices the browser left.
func (h *countingHook) waitCount(t *testing.T, ref string, n int) {
	t.Helper()
	for range 500 {
		if h.count(ref) == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("open consoles of %s = %d, want %d (events %v)", ref, h.count(ref), n, h.events)
}

func TestSessionHookCountsViewers(t *testing.T) {
	h := &countingHook{open: map[string]int{}}
	g := newRig(t, rigOptions{sessions: h})
	v1 := g.mustDial(t, "/ws/vnc/"+refVM)
	s1 := g.mustDial(t, "/ws/serial/"+refVM)
	h.waitCount(t, refVM, 2)
	v1.Close(websocket.StatusNormalClosure, "")
	h.waitCount(t, refVM, 1)
	s1.Close(websocket.StatusNormalClosure, "")
	h.waitCount(t, refVM, 0)
	// A refused console (a stopped instance) is never counted.
	if _, _, err := g.dial(t.Context(), "/ws/vnc/"+refOff, nil); err == nil {
		t.Fatal("a stopped instance's console opened")
	}
	if h.count(refOff) != 0 || len(h.events) != 4 {
		t.Fatalf("events = %v", h.events)
	}
}
