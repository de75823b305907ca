package api

import (
	"net/http"

	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// folderAPI answers /api/folders. Paths travel in the body or the query
// string, never in the route, because a nested path contains slashes.
type folderAPI struct {
	*handler
	svc *folders.Service // nil: every folder route answers 404
}

type folderMemberJSON struct {
	Ref   string `json:"ref"`
	Name  string `json:"name"`
	State string `json:"state"` // the instance's state, "missing" or "unknown"
}

type folderJSON struct {
	Path     string             `json:"path"`
	Name     string             `json:"name"`
	Members  []folderMemberJSON `json:"members"`
	Children []folderJSON       `json:"children"`
}

// folderTreeJSON is GET /api/folders: unfoldered lists at most
// folders.MaxUnfoldered refs; unfolderedCount is always complete.
type folderTreeJSON struct {
	Folders             []folderJSON `json:"folders"`
	Unfoldered          []string     `json:"unfoldered"`
	UnfolderedCount     int          `json:"unfolderedCount"`
	UnfolderedTruncated bool         `json:"unfolderedTruncated"`
}

type folderResultJSON struct {
	Ref     string `json:"ref"`
	Outcome string `json:"outcome"` // ok, failed or skipped
	Message string `json:"message,omitempty"`
	Task    string `json:"task,omitempty"`
}

func toFolder(n *folders.Node) folderJSON {
	out := folderJSON{Path: n.Path, Name: n.Name, Members: []folderMemberJSON{}, Children: []folderJSON{}}
	for _, m := range n.Members {
		out.Members = append(out.Members, folderMemberJSON{Ref: m.Ref, Name: m.Name, State: m.State})
	}
	for _, c := range n.Children {
		out.Children = append(out.Children, toFolder(c))
	}
	return out
}

func (h folderAPI) service() (*folders.Service, error) {
	if h.svc == nil {
		return nil, backends.NotFoundf("folders are not enabled on this server")
	}
	return h.svc, nil
}

// list answers GET /api/folders.
func (h folderAPI) list(w http.ResponseWriter, r *http.Request) error {
	svc, err := h.service()
	if err != nil {
		return err
	}
	t, err := svc.Tree(r.Context())
	if err != nil {
		return err
	}
	out := folderTreeJSON{Folders: []folderJSON{}, Unfoldered: t.Unfoldered, UnfolderedCount: t.UnfolderedCount, UnfolderedTruncated: t.UnfolderedTruncated}
	for _, n := range t.Folders {
		out.Folders = append(out.Folders, toFolder(n))
	}
	setPartial(w, h.Fleet.Snapshot())
	writeJSON(w, http.StatusOK, out)
	return nil
}

// create answers POST /api/folders {path}: 201, parents created as needed.
func (h folderAPI) create(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path string `json:"path"`
	}
	svc, err := h.service()
	if err == nil {
		err = decode(r, &req)
	}
	if err != nil {
		return err
	}
	t, err := svc.Create(r.Context(), middleware.Origin(r, "rest"), req.Path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]string{"path": req.Path, "task": t.ID})
	return nil
}

// delete answers DELETE /api/folders?path=…: members are unfoldered,
// never deleted.
func (h folderAPI) delete(w http.ResponseWriter, r *http.Request) error {
	svc, err := h.service()
	if err != nil {
		return err
	}
	t, err := svc.Delete(r.Context(), middleware.Origin(r, "rest"), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "deleted", "task": t.ID})
	return nil
}

// move answers POST /api/folders/move {from, to}.
func (h folderAPI) move(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	svc, err := h.service()
	if err == nil {
		err = decode(r, &req)
	}
	if err != nil {
		return err
	}
	t, err := svc.Move(r.Context(), middleware.Origin(r, "rest"), req.From, req.To)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"path": req.To, "task": t.ID})
	return nil
}

// memberAdd answers POST /api/folders/members {path, ref}: what a drag
// and drop lands on; the instance leaves the folder it was in.
func (h folderAPI) memberAdd(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path string `json:"path"`
		Ref  string `json:"ref"`
	}
	svc, err := h.service()
	if err == nil {
		err = decode(r, &req)
	}
	if err != nil {
		return err
	}
	t, err := svc.AddMember(r.Context(), middleware.Origin(r, "rest"), req.Path, req.Ref)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "task": t.ID})
	return nil
}

// memberRemove answers DELETE /api/folders/members?ref=….
func (h folderAPI) memberRemove(w http.ResponseWriter, r *http.Request) error {
	svc, err := h.service()
	if err != nil {
		return err
	}
	t, err := svc.RemoveMember(r.Context(), middleware.Origin(r, "rest"), r.URL.Query().Get("ref"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "task": t.ID})
	return nil
}

// action answers POST /api/folders/action {path, action} or {refs,
// action}: 200 with one result per member once all have finished.
func (h folderAPI) action(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path   string   `json:"path"`
		Refs   []string `json:"refs"`
		Action string   `json:"action"`
	}
	svc, err := h.service()
	if err == nil {
		err = decode(r, &req)
	}
	if err != nil {
		return err
	}
	t, results, err := svc.Action(r.Context(), middleware.Origin(r, "rest"), folders.Selection{Path: req.Path, Refs: req.Refs}, req.Action)
	if err != nil {
		return err
	}
	out := make([]folderResultJSON, 0, len(results))
	for _, res := range results {
		out = append(out, folderResultJSON{Ref: res.Ref, Outcome: res.Outcome, Message: res.Message, Task: res.Task})
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out, "task": t.ID})
	return nil
}
