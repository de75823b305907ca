package api

import (
	"net/http"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/handlers/middleware"
)

// whoamiJSON is the answer of GET /api/whoami.
type whoamiJSON struct {
	Login string `json:"login"`
	Name  string `json:"name"`
	Admin bool   `json:"admin"`
	// Enforced reports whether an allowlist (CORRAL_ADMINS) restricts
	// changes to admins; false is open mode.
	Enforced bool   `json:"enforced"`
	Via      string `json:"via"` // tailscale, oidc, peer, anonymous
}

// whoami answers GET /api/whoami: the caller as the request pipeline
// identified it, and whether it may change state.
func (h *handler) whoami(w http.ResponseWriter, r *http.Request) error {
	id := middleware.IdentityFrom(r.Context())
	out := whoamiJSON{Login: id.Login, Name: id.Name, Admin: id.Admin, Enforced: h.Policy.Enforced(), Via: string(id.Via)}
	if id.Via == auth.ViaPeer {
		out.Login = auth.PeerActor
	}
	if out.Via == "" {
		out.Via = string(auth.ViaAnonymous)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
