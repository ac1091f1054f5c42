// Package charts holds the Helm chart (effectors/: nodes, supervisors with
// the gateway, ServiceMonitors, the Grafana dashboard as a ConfigMap) and the
// dashboard itself (effectors/dashboards/effectors.json, also reachable as
// dashboards/effectors.json). It has no code; its tests check the chart and
// the dashboard:
//
//   - the dashboard's shape, and that every metric and label it uses is one a
//     real node and a real supervisor register;
//   - a real Prometheus (Debian package prometheus) scraping two nodes and a
//     supervisor under load answers every dashboard query (skipped when the
//     binary is missing; EA_PROMETHEUS names another);
//   - helm template output: objects, environment, ports, probes, selectors,
//     ServiceMonitors, the dashboard ConfigMap and refused values (skipped
//     when helm is missing; EA_HELM names another);
//   - every .Values path exists and every environment variable is a setting
//     of the binary it configures.
package charts
