package pve

import (
	"net/http"

	"github.com/corral-dev/corral/app/pve"
	"github.com/corral-dev/corral/handlers/middleware"
)

func (h *handler) ticket(r *http.Request, p pve.Params) (any, error) {
	if p["username"] == "" {
		return nil, pve.ParamError("username", "property is missing and it is not optional")
	}
	if p["password"] == "" {
		return nil, pve.ParamError("password", "property is missing and it is not optional")
	}
	t, err := h.Service.Login(r.Context(), p["username"], p["password"], p["realm"])
	if err != nil {
		return nil, err
	}
	h.Audit.Record(r.Context(), middleware.IdentityFrom(r.Context()), "pve", "sign in", t.Username, "ok", "ticket issued")
	return t, nil
}

func (h *handler) users(r *http.Request, p pve.Params) (any, error) {
	return h.Service.Users(r.Context(), p.Bool("full"), h.Admins)
}

func (h *handler) userTokens(r *http.Request, _ pve.Params) (any, error) {
	toks, err := h.Service.Tokens(r.Context(), param(r, "userid"))
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, t := range toks {
		out = append(out, map[string]any{"tokenid": t.TokenID, "expire": 0, "privsep": 0, "comment": t.Comment})
	}
	return out, nil
}

func (h *handler) groups(r *http.Request, _ pve.Params) (any, error) {
	users, err := h.Service.Users(r.Context(), false, h.Admins)
	if err != nil {
		return nil, err
	}
	members := ""
	for _, u := range users {
		if u["groups"] != nil {
			if members != "" {
				members += ","
			}
			members += u["userid"].(string)
		}
	}
	return []map[string]any{{"groupid": "corral-admins", "comment": "Corral's admin allowlist (everyone in open mode)", "users": members}}, nil
}

func (h *handler) roles(*http.Request, pve.Params) (any, error) { return pve.Roles(), nil }

func (h *handler) permissions(r *http.Request, p pve.Params) (any, error) {
	user := p["userid"]
	if user == "" {
		user = middleware.IdentityFrom(r.Context()).Login
	}
	return h.Service.Permissions(user, p["path"]), nil
}

func (h *handler) domains(*http.Request, pve.Params) (any, error) {
	return []map[string]any{
		{"realm": "pam", "type": "pam", "comment": "Linux PAM standard authentication"},
		{"realm": "pve", "type": "pve", "comment": "Proxmox VE authentication server"},
	}, nil
}
