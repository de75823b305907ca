package ui

import (
	"net/http"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/views"
)

// pveTokens is GET /pve-tokens: the Proxmox API's tokens, without secrets.
func (s *server) pveTokens(w http.ResponseWriter, r *http.Request) error {
	return s.renderPVETokens(w, r, "")
}

func (s *server) renderPVETokens(w http.ResponseWriter, r *http.Request, created string) error {
	if s.PVE == nil {
		return backends.NotFoundf("the Proxmox API is not served")
	}
	toks, err := s.PVE.Tokens(r.Context(), "")
	if err != nil {
		return err
	}
	p := views.PVETokens{Page: s.page(r.Context(), r, "Proxmox API tokens", ""), Created: created}
	for _, t := range toks {
		p.Rows = append(p.Rows, views.PVETokenRow{User: t.UserID, TokenID: t.TokenID, Comment: t.Comment,
			Created: t.CreatedAt.Local().Format("2006-01-02 15:04")})
	}
	w.Header().Set("Cache-Control", "no-store") // the page may carry a new secret
	return renderPage(w, r, http.StatusOK, views.PVETokensPage(p), "")
}

// pveTokenCreate is POST /pve-tokens (user, tokenId, comment): the page
// again, with the new token's whole value shown this once.
func (s *server) pveTokenCreate(w http.ResponseWriter, r *http.Request) error {
	if s.PVE == nil {
		return backends.NotFoundf("the Proxmox API is not served")
	}
	user, id := r.PostFormValue("user"), r.PostFormValue("tokenId")
	v, err := s.PVE.CreateToken(r.Context(), user, id, r.PostFormValue("comment"))
	s.Audit.Record(r.Context(), middleware.IdentityFrom(r.Context()), "dashboard", "pve token create", user+"!"+id, outcome(err), backends.SafeMessage(err))
	if err != nil {
		return err
	}
	return s.renderPVETokens(w, r, v)
}

// pveTokenRevoke is POST /pve-tokens/revoke (user, tokenId).
func (s *server) pveTokenRevoke(w http.ResponseWriter, r *http.Request) error {
	if s.PVE == nil {
		return backends.NotFoundf("the Proxmox API is not served")
	}
	user, id := r.PostFormValue("user"), r.PostFormValue("tokenId")
	err := s.PVE.RevokeToken(r.Context(), user, id)
	s.Audit.Record(r.Context(), middleware.IdentityFrom(r.Context()), "dashboard", "pve token revoke", user+"!"+id, outcome(err), backends.SafeMessage(err))
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/pve-tokens", http.StatusSeeOther)
	return nil
}

func outcome(err error) string {
	if err != nil {
		return "refused"
	}
	return "ok"
}
