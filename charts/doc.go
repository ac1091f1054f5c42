// Package charts holds the Helm chart and Grafana dashboard; its test checks the dashboard against the metrics the runtime registers.
package charts
