package vdi

import "k8s.io/client-go/rest"

// ClientConfig returns a copy of cfg for the VDI's Kubernetes clients,
// with agent as the user agent:
//   - Protocol buffers for the typed clients (Leases, pods, PVCs,
//     ConfigMaps): cheaper to encode and decode than JSON on both ends,
//     which counts when a pool's worth of claims arrives at once. The
//     dynamic client (KubeVirt's resources, which have no protobuf form)
//     sets JSON for itself.
//   - A client-side rate limit that a claim burst does not meet: every
//     claimant of a full pool sends one Create, and client-go's default of
//     5 a second (or the 50 a second of the dashboard's backends) would
//     make the 100th claimant wait seconds for its own process. The API
//     server's priority and fairness is what protects it from a client.
func ClientConfig(cfg *rest.Config, agent string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = agent
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg
}
