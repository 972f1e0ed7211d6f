package compile

import (
	"fmt"

	policyv1alpha1 "github.com/toolhooks/toolhooks/api/v1alpha1"
	"github.com/toolhooks/toolhooks/internal/hooks"
	"github.com/toolhooks/toolhooks/internal/hooks/contract"
	"github.com/toolhooks/toolhooks/internal/hooks/ratelimit"
)

func init() {
	register(kind(Kind{Kind: contract.KindName, Resource: "contractpolicies", Short: "ctp"},
		func(l *policyv1alpha1.ContractPolicyList) []policyv1alpha1.ContractPolicy { return l.Items },
		func(ref hooks.PolicyRef, o *policyv1alpha1.ContractPolicy) (hooks.Spec, Common, error) {
			return contractSpec(ref, &o.Spec), Common{o.Spec.EnforcementAction, o.Spec.RequireDecisionLog}, nil
		},
		lintContract,
		func(o *policyv1alpha1.ContractPolicy) (roots, paths []*string) {
			for i := range o.Spec.AllowedPaths {
				paths = append(paths, &o.Spec.AllowedPaths[i])
			}
			for _, c := range o.Spec.ScopedCapabilities {
				for i := range c.AllowedPaths {
					paths = append(paths, &c.AllowedPaths[i])
				}
			}
			return nil, paths
		}))
}

// contractSpec compiles a ContractPolicy spec into its hook's.
func contractSpec(ref hooks.PolicyRef, s *policyv1alpha1.ContractPolicySpec) *contract.Spec {
	c := &contract.Spec{Contract: contract.Contract{MaxToolCalls: int(s.MaxToolCalls), AllowedPaths: s.AllowedPaths},
		StateFailurePolicy: contract.StateFailurePolicy(s.StateFailurePolicy)}
	if k := s.Ask; k != nil {
		c.Ask = &contract.Ask{Tools: k.Tools}
		if k.AfterCalls != nil {
			c.Ask.AfterCalls = int(*k.AfterCalls)
		}
		if k.Expiry != nil {
			c.Ask.ExpirySeconds = int64(k.Expiry.Seconds())
		}
	}
	if ps := s.MaxToolCallsPerSender; ps != nil {
		c.PerSender = &contract.SenderLimit{Calls: int(ps.Calls), WindowMillis: ps.Window.Milliseconds()}
	}
	c.Subjects = subjects(ref, s.Subjects)
	for _, cp := range s.ScopedCapabilities {
		c.ScopedCapabilities = append(c.ScopedCapabilities, contract.Capability{Tool: cp.Tool, AllowedPaths: cp.AllowedPaths})
	}
	for _, r := range s.RateLimits {
		c.RateLimits = append(c.RateLimits, ratelimit.Rule{Tools: r.Tools, PerSenderPerMinute: int(r.PerSenderPerMinute)})
	}
	return c
}

// lintContract warns of an ask.afterCalls its maxToolCalls never lets a
// session reach.
func lintContract(c *policyv1alpha1.ContractPolicy) []string {
	if k := c.Spec.Ask; k != nil && k.AfterCalls != nil && c.Spec.MaxToolCalls > 0 && *k.AfterCalls >= c.Spec.MaxToolCalls {
		return []string{fmt.Sprintf("ask.afterCalls (%d) is not below maxToolCalls (%d): the budget denies before any call is asked about",
			*k.AfterCalls, c.Spec.MaxToolCalls)}
	}
	return nil
}
