package actor

import "github.com/prometheus/client_golang/prometheus"

// partitionsReadDesc is the gauge of the partitions a node reads, by kind,
// computed at scrape time: with the leases in the placement bucket it shows
// whether a node reads exactly the partitions whose lease names it.
var partitionsReadDesc = prometheus.NewDesc("ea_partitions_read",
	"Mailbox partitions this node reads right now (it should hold the lease of each), by kind.",
	[]string{"kind"}, nil)

// collectPlacement sends the placement gauges computed at scrape time.
func (m *metrics) collectPlacement(ch chan<- prometheus.Metric) {
	read := map[string]int{}
	for _, k := range m.node.Kinds() {
		read[k] = 0
	}
	for _, part := range m.node.partitions() {
		read[part.kind.name]++
	}
	for kind, n := range read {
		ch <- prometheus.MustNewConstMetric(partitionsReadDesc, prometheus.GaugeValue, float64(n), kind)
	}
}
