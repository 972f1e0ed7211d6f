package plugins

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names.
const (
	// MetricFailures counts failed plugin calls by plugin (hook name) and kind.
	MetricFailures = "toolhooks_plugin_failures_total"
	// MetricAfterDropped counts after-phase events dropped because a plugin's queue was full.
	MetricAfterDropped = "toolhooks_plugin_after_dropped_total"
	// MetricRestarts counts attempted restarts of stdio plugin processes.
	MetricRestarts = "toolhooks_plugin_restarts_total"
)

// labelPlugin is the label naming a plugin by its hook name.
const labelPlugin = "plugin"

// metrics are the plugin runtime's Prometheus metrics. The plugin label is
// the hook name, which comes from the configuration, so it is bounded by it.
type metrics struct {
	failures     *prometheus.CounterVec
	afterDropped *prometheus.CounterVec
	restarts     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricFailures,
			Help: "Plugin calls that failed, by plugin hook and failure kind (pluginTimeout, pluginUnavailable, " +
				"pluginCrashed, pluginError, pluginBadReply, circuitOpen).",
		}, []string{labelPlugin, "kind"}),
		afterDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricAfterDropped,
			Help: "After-phase plugin events dropped because the plugin's bounded queue was full.",
		}, []string{labelPlugin}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRestarts,
			Help: "Restarts (attempted) of stdio plugin processes after they exited unexpectedly or failed to start.",
		}, []string{labelPlugin}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.failures, m.afterDropped, m.restarts} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering plugin metrics: %w", err)
		}
	}
	return m, nil
}

// failed counts one failure of kind k for plugin.
func (m *metrics) failed(plugin string, k Kind) { m.failures.WithLabelValues(plugin, string(k)).Inc() }
