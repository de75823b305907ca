package api

import (
	"net/http"
	"time"

	"github.com/corral-dev/corral/app/doctor"
)

type checkJSON struct {
	Name    string `json:"name"`
	Status  string `json:"status"` // ok or fail
	Message string `json:"message"`
}

type doctorJSON struct {
	Context   string      `json:"context"`
	Backend   string      `json:"backend"`
	Supported bool        `json:"supported"`
	OK        bool        `json:"ok"`
	Checks    []checkJSON `json:"checks"`
}

// doctor answers GET /api/doctor: every context's own diagnostics (the
// local context names its QEMU accelerator and why), each within 15 s.
func (h *handler) doctor(w http.ResponseWriter, r *http.Request) error {
	reports := doctor.Run(r.Context(), h.Fleet.Backends(), 15*time.Second)
	out := make([]doctorJSON, 0, len(reports))
	for _, rep := range reports {
		d := doctorJSON{Context: rep.Context, Backend: string(rep.Backend), Supported: rep.Supported, OK: rep.OK(), Checks: []checkJSON{}}
		for _, c := range rep.Checks {
			st := "fail"
			if c.OK {
				st = "ok"
			}
			d.Checks = append(d.Checks, checkJSON{Name: c.Name, Status: st, Message: c.Message})
		}
		out = append(out, d)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
