package supervisor

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the supervisor's Prometheus metrics.
type metrics struct {
	started   *prometheus.CounterVec // name
	finished  *prometheus.CounterVec // name, status
	steps     *prometheus.CounterVec // name, event
	conflicts prometheus.Counter
	dropped   *prometheus.CounterVec // reason
	tasks     *prometheus.CounterVec // name
	// stepSeconds: how long applying one change took, from reading the
	// orchestration's record to writing it (graph steps and publishes
	// included).
	stepSeconds *prometheus.HistogramVec // name, event
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_orchestrations_started_total", Help: "Orchestrations started, by name.",
		}, []string{"name"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_orchestrations_finished_total", Help: "Orchestrations that reached a final status, by name and status (COMPLETED, FAILED, CANCELLED).",
		}, []string{"name", "status"}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_orchestration_steps_total", Help: "Changes applied to orchestrations, by name and event (start, result, error, input, cancel).",
		}, []string{"name", "event"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ea_orchestration_conflicts_total", Help: "Compare-and-set conflicts on orchestration records (another supervisor advanced it first).",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_orchestration_records_dropped_total", Help: "Records in supervisor mailboxes acknowledged without effect, by reason (stale: already applied or no longer awaited; unknown: no such orchestration; malformed; type).",
		}, []string{"reason"}),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_orchestration_tasks_sent_total", Help: "Task records published to workers, by orchestration name.",
		}, []string{"name"}),
		stepSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ea_orchestration_step_seconds",
			Help:    "Time to apply one change to an orchestration (read its record, run the graph to its next pause, publish, write), by name and event (start, result, error, input, cancel).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"name", "event"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.started, m.finished, m.steps, m.conflicts, m.dropped, m.tasks, m.stepSeconds} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, invalidf("metrics: %v (one supervisor per registry)", err)
			}
			return nil, err
		}
	}
	return m, nil
}
