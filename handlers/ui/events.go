package ui

import (
	"fmt"
	"io"
	"net/http"
	"time"
)

// heartbeat is how often the event stream sends a comment, so proxies
// and the browser keep an idle connection open.
const heartbeat = 15 * time.Second

// events is GET /ui/events: a server-sent-events stream with an event
// "fleet" after each change of the fleet snapshot, "tasks" after each
// change of a task and, with the VDI broker, "desktops" after claims or
// pools changed, and once when the stream starts. The page's regions re-fetch themselves on them. It
// ends when the client goes.
func (s *server) events(w http.ResponseWriter, r *http.Request) error {
	fleetC, stopFleet := s.Fleet.Subscribe()
	defer stopFleet()
	tasksC, stopTasks := s.Tasks.Subscribe()
	defer stopTasks()
	var desktopsC <-chan struct{} // nil, never ready, without the broker
	if s.VDI != nil {
		c, stop := s.VDI.Subscribe()
		defer stop()
		desktopsC = c
	}

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(msg string) bool {
		if _, err := io.WriteString(w, msg); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(": connected\n\n") {
		return nil // headers are out: nothing more to say
	}
	// A change between the page's render and this subscription would be
	// missed (the stream replays nothing): the desktops page re-reads its
	// region once the stream is up, and after every reconnect.
	if desktopsC != nil && !send("event: desktops\ndata: connected\n\n") {
		return nil
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		var msg string
		select {
		case <-r.Context().Done():
			return nil
		case <-fleetC:
			msg = fmt.Sprintf("event: fleet\ndata: %d\n\n", s.Fleet.Snapshot().Version)
		case <-tasksC:
			msg = "event: tasks\ndata: changed\n\n"
		case <-desktopsC:
			msg = "event: desktops\ndata: changed\n\n"
		case <-tick.C:
			msg = ": heartbeat\n\n"
		}
		if !send(msg) {
			return nil
		}
	}
}
