package api

import (
	"net/http"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// resizeBody is the body of PATCH /api/vdi/pools/{kind}/{ns}/{pool}.
type resizeBody struct {
	Size *int `json:"size"`
}

// resize answers PATCH /api/vdi/pools/{kind}/{ns}/{pool} {"size": N}
// (admins): a growth clones in the background, 202 with its task; a
// shrink (unclaimed members only; 400 naming the claimed ones when too
// few are free; 409 when members were claimed while it ran, after
// removing some) or no change is done first, 200. A CT pool is refused
// with its remedy (corral vdi ct-pool apply).
func (v vdiAPI) resize(w http.ResponseWriter, r *http.Request) error {
	var body resizeBody
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Size == nil {
		return backends.Invalidf(`no size: the body is {"size": N}, N from 1 to %d`, vdi.MaxPoolSize)
	}
	res, started, err := v.VDI.StartResizePool(r.Context(), middleware.IdentityFrom(r.Context()), "rest", pathID(r, "pool"), *body.Size)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if started {
		status = http.StatusAccepted
	}
	writeJSON(w, status, res)
	return nil
}
