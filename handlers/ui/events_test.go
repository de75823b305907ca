package ui_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
)

func TestEventsStream(t *testing.T) {
	e := labEnv(t)
	srv := httptest.NewServer(e.handler)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/ui/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	wait := func(want string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("stream ended before %q", want)
				}
				if l == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %q within the deadline", want)
			}
		}
	}
	wait(": connected") // subscribed: changes from now on are sent

	// A change made behind the dashboard's back, as another surface would.
	b := e.sims["lab"]
	ref, _ := backends.ParseRef("sim/lab/-/web-lab-0000")
	if err := b.Power(ctx, ref, backends.ActionStop); err != nil {
		t.Fatal(err)
	}
	e.fleet.Refresh(ctx)
	wait("event: fleet")

	rec := e.post(web0+"/start", "section#summary")
	if rec.Code != http.StatusOK {
		t.Fatalf("start: %d", rec.Code)
	}
	wait("event: tasks")

	cancel() // the client goes; the handler must return (checked by the server's Close)
	for range lines {
	}
	if !strings.HasPrefix(res.Header.Get("Cache-Control"), "no-store") {
		t.Errorf("Cache-Control = %q", res.Header.Get("Cache-Control"))
	}
}
