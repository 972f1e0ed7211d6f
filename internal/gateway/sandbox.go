package gateway

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolhooks/toolhooks/internal/sandbox"
)

// sandboxState is how the sandbox stands: "landlock", "off" or "unavailable".
func sandboxState(sb *sandbox.Sandbox) string {
	switch {
	case sb.Mode() == sandbox.ModeOff:
		return sandbox.ModeOff
	case sb.Usable() != nil:
		return "unavailable"
	}
	return sandbox.ModeLandlock
}

// reportSandbox registers toolhooks_sandbox_info and logs a sandbox that is
// off or unavailable.
func (s *Server) reportSandbox(reg prometheus.Registerer, sb *sandbox.Sandbox) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolhooks_sandbox_info",
		Help: "1 for how the processes tools start are confined: state landlock (with the kernel's Landlock ABI), " +
			"off (--sandbox=off: not confined) or unavailable (Landlock missing, or too old to deny the network: tool calls are refused).",
	}, []string{"state", "abi"})
	if err := reg.Register(g); err != nil {
		return err
	}
	state := sandboxState(sb)
	g.WithLabelValues(state, strconv.Itoa(sb.ABI())).Set(1)
	switch state {
	case sandbox.ModeOff:
		s.log.Warn("Sandbox is off: processes started by tools are not confined by Landlock", "sandbox", sb.Status())
	case "unavailable":
		s.log.Error("Landlock cannot confine tools as configured: the gateway decides calls but refuses to run tools "+
			"(the sandbox attribute says why and which flag lifts it)",
			"sandbox", sb.Status())
	default:
		s.log.Info("Sandbox", "sandbox", sb.Status())
	}
	return nil
}
