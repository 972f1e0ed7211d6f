package compile

import (
	"cmp"
	"fmt"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/plugins"
)

func init() {
	k := kind(Kind{Kind: plugins.KindName, Resource: "pluginhooks", Short: "ph", ReportsDegraded: true},
		func(l *policyv1alpha1.PluginHookList) []policyv1alpha1.PluginHook { return l.Items },
		func(ref hooks.PolicyRef, o *policyv1alpha1.PluginHook) (hooks.Spec, Common, error) {
			p, err := pluginSpec(ref, &o.Spec)
			return p, Common{Action: o.Spec.EnforcementAction}, err
		}, nil, nil)
	k.Endpoints = func(obj Object) []Endpoint {
		if h := obj.(*policyv1alpha1.PluginHook).Spec.Transport.HTTP; h != nil {
			return []Endpoint{{Service: &h.Service, URL: &h.URL}}
		}
		return nil
	}
	register(k)
}

// pluginSpec compiles a PluginHook spec into its hook's.
func pluginSpec(ref hooks.PolicyRef, s *policyv1alpha1.PluginHookSpec) (*plugins.Spec, error) {
	if s.Timeout == nil { // the API server and the file loader apply the CRD's default
		return nil, fmt.Errorf("spec.timeout: not set: %w", hooks.ErrInvalidSpec)
	}
	p := &plugins.Spec{
		TimeoutMillis: s.Timeout.Milliseconds(),
		FailOpen:      s.FailurePolicy == policyv1alpha1.FailurePolicyIgnore, // only when said explicitly
		Tools:         s.Tools,
	}
	for i, e := range s.Events {
		switch e {
		case policyv1alpha1.EventToolBefore:
			p.Before = true
		case policyv1alpha1.EventToolAfter:
			p.After = true
		case policyv1alpha1.EventToolAll:
			p.Before, p.After = true, true
		default:
			return nil, fmt.Errorf("spec.events[%d]: unknown event %q: %w", i, e, hooks.ErrInvalidSpec)
		}
	}
	if h := s.Transport.HTTP; h != nil {
		p.HTTP = &plugins.HTTPSpec{URL: h.URL, CABundle: h.CABundle}
		if svc := h.Service; svc != nil {
			scheme := "http"
			if h.CABundle != "" {
				scheme = "https"
			}
			p.HTTP.URL = fmt.Sprintf("%s://%s.%s.svc:%d%s", scheme, svc.Name, cmp.Or(svc.Namespace, ref.Namespace),
				cmp.Or(svc.Port, 80), svc.Path)
		}
	}
	if st := s.Transport.Stdio; st != nil {
		p.Stdio = &plugins.StdioSpec{Command: st.Command, Args: st.Args}
		if len(st.Env) > 0 {
			p.Stdio.Env = make(map[string]string, len(st.Env))
			for _, e := range st.Env {
				p.Stdio.Env[e.Name] = e.Value
			}
		}
	}
	return p, nil
}
