package actor

import "github.com/prometheus/client_golang/prometheus"

// versionMetrics count what state versions do on a node (see version.go).
type versionMetrics struct {
	upgrades *prometheus.CounterVec
	refusals *prometheus.CounterVec
	failures *prometheus.CounterVec
}

func newVersionMetrics() *versionMetrics {
	return &versionMetrics{
		upgrades: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_state_upgrades_total",
			Help: "State documents of an older state version this node upgraded when it loaded them (written at the version of the kind at the next state write), by kind.",
		}, []string{"kind"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_state_version_refusals_total",
			Help: "Times an effector's state document was written by a newer version of its kind than this node hosts, so its records wait for a node of that version (once per wait), by kind.",
		}, []string{"kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_state_upgrade_failures_total",
			Help: "Times upgrading an effector's state document to this node's version of its kind failed, so its records wait (once per wait), by kind.",
		}, []string{"kind"}),
	}
}

func (v *versionMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{v.upgrades, v.refusals, v.failures}
}

// hosted starts the counters of kind at 0.
func (v *versionMetrics) hosted(kind string) {
	for _, c := range []*prometheus.CounterVec{v.upgrades, v.refusals, v.failures} {
		c.WithLabelValues(kind)
	}
}
