package web

import "github.com/prometheus/client_golang/prometheus"

// metrics of the gateway, registered on Config.Registerer.
type metrics struct {
	connections   prometheus.Gauge
	subscriptions prometheus.Gauge
	frames        *prometheus.CounterVec // direction, type
	disconnects   *prometheus.CounterVec // reason
	sends         *prometheus.CounterVec // outcome
	queued        prometheus.Histogram
	usersReloads  *prometheus.CounterVec // outcome
	forbidden     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ea_gateway_connections", Help: "WebSocket connections open on the gateway.",
		}),
		subscriptions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ea_gateway_subscriptions", Help: "Subscriptions open on the gateway, all connections.",
		}),
		frames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_gateway_frames_total", Help: "Frames received (in) and sent (out) by the gateway, by frame type.",
		}, []string{"direction", "type"}),
		disconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_gateway_disconnects_total", Help: "Connections the gateway ended, by reason (client, unauthorized, revoked, slow_reader, frame_too_large, stopping, error).",
		}, []string{"reason"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_gateway_sends_total", Help: "Send frames, by outcome (stored, duplicate, refused, failed).",
		}, []string{"outcome"}),
		queued: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ea_gateway_send_buffer_peak_bytes", Help: "Peak bytes waiting in a connection's send buffer, observed when it closes.",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 9),
		}),
		usersReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_gateway_users_reloads_total", Help: "Changes of the users file the gateway read, by outcome (loaded, failed: the users as last read stay in force).",
		}, []string{"outcome"}),
		forbidden: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ea_gateway_forbidden_total", Help: "Requests, sends and subscriptions refused because the identity does not own what they name.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.connections, m.subscriptions, m.frames, m.disconnects, m.sends, m.queued, m.usersReloads, m.forbidden} {
			if err := reg.Register(c); err != nil {
				return nil, invalidf("register metrics: %v", err)
			}
		}
	}
	return m, nil
}
