package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/auth"
)

// patch sends PATCH path with body as login and decodes the answer.
func patch(t *testing.T, srv *httptest.Server, path, login, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPatch, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if login != "" {
		req.Header.Set(auth.HeaderTailscaleLogin, login)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("PATCH %s: %v in %s", path, err, b)
	}
	return resp.StatusCode
}

type resizeJSON struct {
	Pool     string
	From, To int
	Added    []string
	Removed  []string
	Task     string
	Error    string
}

// TestVDIPoolResize: PATCH /api/vdi/pools/vm/-/desk {"size": N}: admins
// only; a growth answers 202 with its task, which adds the members; a
// shrink answers 200 with what it removed; a shrink below the claimed
// members is a 400 that names them; bad bodies are 400s that say what
// is accepted; a CT pool is refused with its remedy.
func TestVDIPoolResize(t *testing.T) {
	srv := vdiServer(t, true)
	path := "/api/vdi/pools/vm/-/desk"
	var res resizeJSON
	for _, tc := range []struct {
		name, login, path, body string
		want                    int
		has                     string
	}{
		{"anonymous", "", path, `{"size":3}`, 401, ""},
		{"a user", "alice@example.com", path, `{"size":3}`, 403, ""},
		{"no size", "boss@example.com", path, `{}`, 400, `{"size": N}`},
		{"size text", "boss@example.com", path, `{"size":"3"}`, 400, "size"},
		{"unknown field", "boss@example.com", path, `{"size":3,"golden":"x"}`, 400, "unknown field"},
		{"size 0", "boss@example.com", path, `{"size":0}`, 400, "accepted are 1 to 200"},
		{"no pool", "boss@example.com", "/api/vdi/pools/vm/-/nope", `{"size":3}`, 404, "does not exist"},
		{"a CT pool", "boss@example.com", "/api/vdi/pools/ct/ns/desk", `{"size":3}`, 400, "corral vdi ct-pool apply desk -n ns --size 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res = resizeJSON{}
			if code := patch(t, srv, tc.path, tc.login, tc.body, &res); code != tc.want || !strings.Contains(res.Error, tc.has) || res.Error == "" {
				t.Fatalf("= %d %q, want %d with %q", code, res.Error, tc.want, tc.has)
			}
		})
	}
	res = resizeJSON{}
	if code := patch(t, srv, path, "boss@example.com", `{"size":3}`, &res); code != 202 || res.Task == "" || res.From != 2 || res.To != 3 {
		t.Fatalf("grow = %d %+v", code, res)
	}
	var tk struct{ Status string }
	for range 500 {
		call(t, srv, http.MethodGet, "/api/tasks/"+res.Task, "boss@example.com", &tk)
		if tk.Status != "running" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var pools []struct {
		ID            string
		Members, Free int
	}
	if call(t, srv, http.MethodGet, "/api/vdi/pools", "alice@example.com", &pools); tk.Status != "done" || len(pools) != 1 || pools[0].Members != 3 {
		t.Fatalf("after the growth: task %q, pools %+v", tk.Status, pools)
	}
	var d desktopJSON
	call(t, srv, http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "alice@example.com", &d)
	res = resizeJSON{}
	if code := patch(t, srv, path, "boss@example.com", `{"size":0}`, &res); code != 400 {
		t.Fatalf("shrink to 0 = %d", code)
	}
	var b desktopJSON
	call(t, srv, http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "bob@example.com", &b)
	res = resizeJSON{}
	if code := patch(t, srv, path, "boss@example.com", `{"size":1}`, &res); code != 400 || !strings.Contains(res.Error, d.ID) ||
		!strings.Contains(res.Error, b.ID) || !strings.Contains(res.Error, "the smallest size now is 2") {
		t.Fatalf("shrink below the claimed members = %d %q", code, res.Error)
	}
	res = resizeJSON{}
	if code := patch(t, srv, path, "boss@example.com", `{"size":2}`, &res); code != 200 || len(res.Removed) != 1 || res.Task == "" ||
		res.Removed[0] == d.ID || res.Removed[0] == b.ID {
		t.Fatalf("shrink to 2 = %d %+v", code, res)
	}
	if call(t, srv, http.MethodGet, "/api/vdi/desktops/"+d.ID, "alice@example.com", &d); !d.Running {
		t.Fatalf("alice's desktop after the shrink: %+v", d)
	}
}
