package folders

import (
	"context"
	"strings"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/backends"
)

// MaxUnfoldered caps the refs Tree lists as unfoldered; the count is
// always complete.
const MaxUnfoldered = 1000

// StateMissing is the state of a member the fleet does not have while its
// context answers; StateUnknown, of one whose context does not answer.
const (
	StateMissing = "missing"
	StateUnknown = "unknown"
)

// Member is an instance of a folder as the live fleet sees it.
type Member struct {
	Ref   string
	Name  string
	State string // the instance's state, StateMissing or StateUnknown
}

// Node is a folder with its members and subfolders.
type Node struct {
	Path     string
	Name     string // the last segment
	Members  []Member
	Children []*Node
}

// Tree is every folder, rooted at the top-level ones, plus the instances
// in no folder: up to MaxUnfoldered refs, and their full count.
type Tree struct {
	Folders             []*Node
	Unfoldered          []string
	UnfolderedCount     int
	UnfolderedTruncated bool
	Partial             []string // contexts that did not answer
}

// Tree returns the folders with their members resolved against the live
// fleet snapshot.
func (s *Service) Tree(ctx context.Context) (Tree, error) {
	paths, err := s.store.Folders(ctx)
	if err != nil {
		return Tree{}, err
	}
	members, err := s.store.FolderMembers(ctx)
	if err != nil {
		return Tree{}, err
	}
	snap := s.fleet.Snapshot()
	t := Tree{Folders: []*Node{}, Unfoldered: []string{}, Partial: snap.Partial()}
	nodes := make(map[string]*Node, len(paths))
	for _, p := range paths { // parents come before their children
		n := &Node{Path: p, Name: p[strings.LastIndex(p, "/")+1:], Members: []Member{}, Children: []*Node{}}
		nodes[p] = n
		if i := strings.LastIndex(p, "/"); i >= 0 && nodes[p[:i]] != nil {
			nodes[p[:i]].Children = append(nodes[p[:i]].Children, n)
		} else {
			t.Folders = append(t.Folders, n)
		}
	}
	foldered := make(map[string]bool, len(members))
	for _, m := range members {
		foldered[m.Ref] = true
		if n := nodes[m.Path]; n != nil {
			n.Members = append(n.Members, member(snap, m.Ref))
		}
	}
	for _, in := range snap.Instances {
		ref := in.Ref.String()
		if foldered[ref] {
			continue
		}
		t.UnfolderedCount++
		if len(t.Unfoldered) < MaxUnfoldered {
			t.Unfoldered = append(t.Unfoldered, ref)
		} else {
			t.UnfolderedTruncated = true
		}
	}
	return t, nil
}

func member(snap *fleet.Snapshot, text string) Member {
	m := Member{Ref: text, State: StateMissing}
	ref, err := backends.ParseRef(text)
	if err != nil {
		return m
	}
	m.Name = ref.Name
	if in, ok := snap.Find(ref); ok {
		m.State = string(in.State)
		return m
	}
	for _, c := range snap.Contexts {
		if c.Key == ref.ContextKey() && c.Health != fleet.HealthOK {
			m.State = StateUnknown
		}
	}
	return m
}
