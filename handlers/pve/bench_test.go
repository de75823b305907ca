package pve_test

import (
	"net/http/httptest"
	"testing"
)

// BenchmarkClusterResources serves /cluster/resources?type=vm over a
// 10,000-instance sim fleet (target: under 30 ms per call).
func BenchmarkClusterResources(b *testing.B) {
	e := newEnv(b, envOpts{simSize: 10000})
	tok := e.token(b, "root@pam", "bench")
	get := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/api2/json/cluster/resources?type=vm", nil)
		req.Header.Set("Authorization", "PVEAPIToken="+tok)
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		return rec
	}
	if rec := get(); rec.Code != 200 { // first call registers the vmids
		b.Fatalf("status %d", rec.Code)
	}
	b.ResetTimer()
	for b.Loop() {
		rec := get()
		b.SetBytes(int64(rec.Body.Len()))
	}
}
