package cli

import (
	"github.com/prometheus/client_golang/prometheus"
)

// ConnState is what [NewConnStateCollector] asks of the NATS connection
// (*bus.Conn): the state it is in now, one of states.
type ConnState interface{ State() string }

// connStateCollector exports ea_nats_connection_state: 1 for the state the
// connection is in, 0 for the others, read at scrape time.
type connStateCollector struct {
	desc   *prometheus.Desc
	conn   ConnState
	states []string
}

// NewConnStateCollector returns the collector of the gauge
// ea_nats_connection_state{state}: 1 for the state conn is in now (one of
// states, e.g. connected, reconnecting, closed), 0 for the others, so that a
// dashboard or an alert sees a process that lost NATS.
func NewConnStateCollector(conn ConnState, states []string) prometheus.Collector {
	return &connStateCollector{
		desc: prometheus.NewDesc("ea_nats_connection_state",
			"The state of this process's NATS connection: 1 for the state it is in (connected, reconnecting, closed), 0 for the others.",
			[]string{"state"}, nil),
		conn:   conn,
		states: states,
	}
}

func (c *connStateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *connStateCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.conn.State()
	for _, s := range c.states {
		v := 0.0
		if s == now {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, s)
	}
}
