package api

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

type pveTokenJSON struct {
	User      string    `json:"user"`
	TokenID   string    `json:"tokenId"`
	Comment   string    `json:"comment"`
	CreatedAt time.Time `json:"createdAt"`
}

// pveTokenList answers GET /api/pve/tokens[?user=USER@REALM]: the
// Proxmox API tokens, without secrets (only their hashes are kept).
func (h *handler) pveTokenList(w http.ResponseWriter, r *http.Request) error {
	if h.PVE == nil {
		return backends.NotFoundf("the Proxmox API is not served")
	}
	toks, err := h.PVE.Tokens(r.Context(), r.URL.Query().Get("user"))
	if err != nil {
		return err
	}
	out := make([]pveTokenJSON, 0, len(toks))
	for _, t := range toks {
		out = append(out, pveTokenJSON{User: t.UserID, TokenID: t.TokenID, Comment: t.Comment, CreatedAt: t.CreatedAt.UTC()})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// pveTokenCreate answers POST /api/pve/tokens {"user", "tokenId",
// "comment"}: 201 {"value": "USER@REALM!TOKENID=SECRET"}, the whole value
// to give a PVE client, shown this once.
func (h *handler) pveTokenCreate(w http.ResponseWriter, r *http.Request) error {
	if h.PVE == nil {
		return backends.NotFoundf("the Proxmox API is not served")
	}
	var req struct {
		User    string `json:"user"`
		TokenID string `json:"tokenId"`
		Comment string `json:"comment"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	v, err := h.PVE.CreateToken(r.Context(), req.User, req.TokenID, req.Comment)
	if err != nil {
		h.guard.Audit.Record(r.Context(), middleware.IdentityFrom(r.Context()), "rest", "pve token create", req.User+"!"+req.TokenID, "refused", backends.SafeMessage(err))
		return err
	}
	h.guard.Audit.Record(r.Context(), middleware.IdentityFrom(r.Context()), "rest", "pve token create", req.User+"!"+req.TokenID, "ok", "")
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, map[string]string{"value": v})
	return nil
}

// pveTokenRevoke answers DELETE /api/pve/tokens/{user}/{tokenId}.
func (h *handler) pveTokenRevoke(w http.ResponseWriter, r *http.Request) error {
	if h.PVE == nil {
		return backends.NotFoundf("the Proxmox API is not served")
	}
	user, id := chi.URLParam(r, "user"), chi.URLParam(r, "tokenId")
	err := h.PVE.RevokeToken(r.Context(), user, id)
	outcome := "ok"
	if err != nil {
		outcome = "refused"
	}
	h.guard.Audit.Record(r.Context(), middleware.IdentityFrom(r.Context()), "rest", "pve token revoke", user+"!"+id, outcome, backends.SafeMessage(err))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "revoked"})
	return nil
}
