package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/views"
)

// foldersChanged is the HX-Trigger event after a folder change: the
// folder tree and a folder-filtered inventory re-fetch on it.
const foldersChanged = "corral:folders"

// folderOnly resolves q.Folder into q.Only: the inventory of a folder is
// the members of its subtree. An unknown folder is NotFound.
func (s *server) folderOnly(ctx context.Context, q fleet.Query) (fleet.Query, error) {
	if q.Folder == "" || s.Folders == nil {
		q.Folder = ""
		return q, nil
	}
	refs, err := s.Folders.MemberRefs(ctx, q.Folder)
	if err != nil {
		return q, err
	}
	q.Only = make(map[string]bool, len(refs))
	for _, r := range refs {
		q.Only[r] = true
	}
	return q, nil
}

// foldersModel formats the folder tree for the view; active is the folder
// the inventory is filtered by.
func (s *server) foldersModel(r *http.Request, active string) (*views.Folders, error) {
	if s.Folders == nil {
		return nil, nil
	}
	t, err := s.Folders.Tree(r.Context())
	if err != nil {
		return nil, err
	}
	f := &views.Folders{
		Active:     active,
		AllURL:     "/",
		Unfoldered: plural(t.UnfolderedCount, "instance", "instances") + " in no folder",
		Admin:      middleware.IdentityFrom(r.Context()).Admin,
		Actions:    folders.Actions,
	}
	if len(t.Partial) > 0 {
		f.Partial = "Not answering: " + strings.Join(t.Partial, ", ")
	}
	var conv func(n *folders.Node, depth int) views.FolderNode
	conv = func(n *folders.Node, depth int) views.FolderNode {
		v := views.FolderNode{Path: n.Path, Name: n.Name, URL: "/?folder=" + url.QueryEscape(n.Path),
			Depth: depth, Members: len(n.Members), Active: n.Path == active}
		f.Paths = append(f.Paths, n.Path)
		for _, c := range n.Children {
			cv := conv(c, depth+1)
			v.Members += cv.Members
			v.Children = append(v.Children, cv)
		}
		return v
	}
	for _, n := range t.Folders {
		f.Folders = append(f.Folders, conv(n, 0))
	}
	return f, nil
}

// foldersShow is GET /ui/folders: the tree alone, for htmx re-fetches.
func (s *server) foldersShow(w http.ResponseWriter, r *http.Request) error {
	if s.Folders == nil {
		return backends.NotFoundf("folders are not configured")
	}
	f, err := s.foldersModel(r, r.URL.Query().Get("folder"))
	if err != nil {
		return err
	}
	return renderPage(w, r, http.StatusOK, views.FoldersTree(*f), "")
}

// folderPost handles the folder forms: POST /folders/{op}. Each change
// runs as a task through app/folders. htmx gets the new tree (and the
// events that refresh the inventory and the activity panel); a plain
// browser is sent back to the datacenter page, or, for a bulk action, gets
// the page with the results.
func (s *server) folderPost(op string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.Folders == nil {
			return backends.NotFoundf("folders are not configured")
		}
		if err := r.ParseForm(); err != nil {
			return backends.Invalidf("the form could not be read: send application/x-www-form-urlencoded fields")
		}
		o := middleware.Origin(r, "dashboard")
		ctx := r.Context()
		form := func(k string) string { return strings.TrimSpace(r.PostForm.Get(k)) }
		var notice string
		var results *views.BulkResults
		show := "" // the folder to show afterwards
		switch op {
		case "create":
			if _, err := s.Folders.Create(ctx, o, form("path")); err != nil {
				return err
			}
			show, notice = form("path"), "Folder "+form("path")+" created."
		case "delete":
			if _, err := s.Folders.Delete(ctx, o, form("path")); err != nil {
				return err
			}
			notice = "Folder " + form("path") + " deleted; its instances are in no folder now."
		case "move":
			from, to := form("from"), form("to")
			if r.PostForm.Has("parent") { // a folder dropped onto another (or the top)
				to = from[strings.LastIndex(from, "/")+1:]
				if p := form("parent"); p != "" {
					to = p + "/" + to
				}
			}
			if from == to {
				return backends.Invalidf("folder %q is already there: give another path", from)
			}
			if _, err := s.Folders.Move(ctx, o, from, to); err != nil {
				return err
			}
			show, notice = to, "Folder "+from+" is now "+to+"."
		case "members":
			path, ref := form("path"), form("ref")
			var err error
			if path == "" {
				_, err = s.Folders.RemoveMember(ctx, o, ref)
				notice = ref + " is in no folder now."
			} else {
				_, err = s.Folders.AddMember(ctx, o, path, ref)
				notice = ref + " moved to " + path + "."
			}
			if err != nil {
				return err
			}
			show = path
		case "action":
			path, action := form("path"), form("action")
			t, res, err := s.Folders.Action(ctx, o, folders.Selection{Path: path}, action)
			if err != nil {
				return err
			}
			results = bulkModel(path, action, t.ID, res)
			show = path
		default:
			return backends.NotFoundf("no folder operation %q", op)
		}
		if !isHTMX(r) && results == nil {
			to := "/"
			if show != "" {
				to = "/?folder=" + url.QueryEscape(show)
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return nil
		}
		active := ""
		if u, err := url.Parse(r.Header.Get("HX-Current-URL")); err == nil {
			active = u.Query().Get("folder")
		}
		f, err := s.foldersModel(r, active)
		if err != nil {
			return err
		}
		f.Notice, f.Results = notice, results
		if !isHTMX(r) { // a bulk action without htmx: the page with its results
			return s.datacenterWith(w, r, fleet.Query{Folder: show}, f)
		}
		trigger := foldersChanged + ", " + tasksChanged
		if op == "action" { // membership did not change; the fleet events refresh the table
			trigger = tasksChanged
		}
		w.Header().Set("HX-Trigger", trigger)
		return renderPage(w, r, http.StatusOK, views.FoldersTree(*f), "")
	}
}

// bulkModel formats a bulk action's results.
func bulkModel(path, action, taskID string, res []folders.Result) *views.BulkResults {
	b := &views.BulkResults{Path: path, Action: action}
	if taskID != "" {
		b.TaskURL = "/ui/tasks/" + taskID
	}
	n := map[string]int{}
	for _, r := range res {
		n[r.Outcome]++
		row := views.BulkRow{Ref: r.Ref, Name: r.Ref, Outcome: r.Outcome, Message: r.Message}
		if ref, err := backends.ParseRef(r.Ref); err == nil {
			row.Name, row.URL = ref.Name, vmURL(ref)
		}
		b.Rows = append(b.Rows, row)
	}
	b.Summary = fmt.Sprintf("%d ok, %d skipped, %d failed", n[folders.OutcomeOK], n[folders.OutcomeSkipped], n[folders.OutcomeFailed])
	if len(res) == 0 {
		b.Summary = "The folder has no members."
	}
	return b
}
