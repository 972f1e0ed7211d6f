/*
Copyright 2026 The toolhooks Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ScopedCapability grants one tool, optionally only under some paths.
type ScopedCapability struct {
	// tool is the exact tool name (read_file, write_file, edit_file, apply_patch,
	// list_dir, shell, code_exec, git, process, ...).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Tool string `json:"tool"`
	// allowedPaths are path prefixes the tool's paths must resolve under; empty grants
	// the tool without a path restriction.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	AllowedPaths []string `json:"allowedPaths,omitempty"`
}

// SenderBudget bounds one caller's calls over a sliding window.
// +kubebuilder:validation:XValidation:rule="duration(self.window) >= duration('1m') && duration(self.window) <= duration('720h')",message="window must be between 1m and 720h"
type SenderBudget struct {
	// calls is the most calls the caller may make in any window.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000000
	Calls int32 `json:"calls"`
	// window is the length of the sliding window, e.g. 1h or 24h (1m to 720h).
	// +required
	Window metav1.Duration `json:"window"`
}

// RateLimit limits calls per sender and tool.
type RateLimit struct {
	// tools is a glob of tool names the limit applies to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Tools string `json:"tools"`
	// perSenderPerMinute is the most calls one sender may make to one matching tool
	// in any 60-second window. When several limits match a tool, the largest applies.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	PerSenderPerMinute int32 `json:"perSenderPerMinute"`
}

// ContractAsk names the calls of a ContractPolicy that need a person's
// approval once the contract allowed them (and counted them): a call needs
// approval when its tool matches tools or when it comes after the session's
// first afterCalls calls.
// +kubebuilder:validation:XValidation:rule="has(self.tools) || has(self.afterCalls)",message="ask needs tools or afterCalls"
type ContractAsk struct {
	// tools are globs of tool names whose calls need approval.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	Tools []string `json:"tools,omitempty"`
	// afterCalls lets a session make this many calls on its own; every call
	// after them (any tool) needs approval. Calls are counted like
	// maxToolCalls counts them: a call asked about and not run is not counted.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483646
	AfterCalls *int32 `json:"afterCalls,omitempty"`
	// expiry is how long a request for approval stays open before it is denied
	// as expired (default 10m, at most 24h).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('24h')",message="expiry must be more than 0s and at most 24h"
	Expiry *metav1.Duration `json:"expiry,omitempty"`
}

// StateFailurePolicy is what a contract does with a call its state store cannot count.
// +kubebuilder:validation:Enum=Fail;Ignore
type StateFailurePolicy string

// ContractPolicySpec is a per-session contract: a budget, scoped capabilities and rate limits.
// +kubebuilder:validation:XValidation:rule="(has(self.maxToolCalls) && self.maxToolCalls > 0) || (has(self.scopedCapabilities) && size(self.scopedCapabilities) > 0) || (has(self.allowedPaths) && size(self.allowedPaths) > 0) || (has(self.rateLimits) && size(self.rateLimits) > 0) || has(self.maxToolCallsPerSender) || has(self.ask)",message="a contract needs at least one of maxToolCalls, maxToolCallsPerSender, scopedCapabilities, allowedPaths, rateLimits or ask"
type ContractPolicySpec struct {
	// subjects selects the calls (by session, channel, sender and verified caller) this
	// contract binds; empty binds every call.
	// When every policy of a gateway has subjects, a call that none of them
	// binds is denied (rule noPolicyBindsCaller).
	// +optional
	Subjects *Subjects `json:"subjects,omitempty"`
	// maxToolCalls is the most tool calls one session may execute; 0 means no budget.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000000
	MaxToolCalls int32 `json:"maxToolCalls,omitempty"`
	// maxToolCallsPerSender bounds the calls one verified caller may make over a sliding
	// window, across all its sessions: opening new sessions does not escape it.
	// +optional
	MaxToolCallsPerSender *SenderBudget `json:"maxToolCallsPerSender,omitempty"`
	// scopedCapabilities grant tools, optionally under path prefixes. When any grant has
	// allowedPaths, file-system and exec tools without a grant of their own are denied.
	// +optional
	// +listType=map
	// +listMapKey=tool
	// +kubebuilder:validation:MaxItems=64
	ScopedCapabilities []ScopedCapability `json:"scopedCapabilities,omitempty"`
	// allowedPaths are path prefixes every file-system and exec tool's paths must resolve under.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	AllowedPaths []string `json:"allowedPaths,omitempty"`
	// rateLimits limit calls per sender and tool over a sliding minute.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	RateLimits []RateLimit `json:"rateLimits,omitempty"`
	// ask names the calls that, once this contract allows and counts them,
	// need a person's approval (a ToolCallApproval) before they run: calls to
	// some tools, or every call of a session past its first afterCalls.
	// +optional
	Ask *ContractAsk `json:"ask,omitempty"`
	// stateFailurePolicy says what a call gets when the gateway's shared state store
	// (Redis) cannot count it against this contract's budgets and rate limits in
	// time: Fail (default) denies it (rule stateStore), Ignore allows it uncounted.
	// Gateways that count in process never fail this way.
	// +optional
	// +kubebuilder:default=Fail
	StateFailurePolicy StateFailurePolicy `json:"stateFailurePolicy,omitempty"`
	// requireDecisionLog makes this policy enforceable only by gateways that
	// write the decision log (masked arguments beside each audit record, so
	// that the calls can be replayed against a policy change): a gateway
	// without it denies every call with rule policyUnenforceable.
	// +optional
	RequireDecisionLog bool `json:"requireDecisionLog,omitempty"`
	// enforcementAction is Deny (default) or Warn (dry-run: record, do not block).
	// +optional
	// +kubebuilder:default=Deny
	EnforcementAction EnforcementAction `json:"enforcementAction,omitempty"`
	// gatewaySelector selects gateway pods in this namespace; empty selects all of them.
	// +optional
	GatewaySelector *metav1.LabelSelector `json:"gatewaySelector,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ctp,categories=toolhooks
// +kubebuilder:printcolumn:name="Budget",type=integer,JSONPath=`.spec.maxToolCalls`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.enforcementAction`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Enforced",type=string,JSONPath=`.status.conditions[?(@.type=="Enforced")].status`
// +kubebuilder:printcolumn:name="Gateways",type=integer,JSONPath=`.status.gateways.selected`
// +kubebuilder:printcolumn:name="Enforcing",type=integer,JSONPath=`.status.gateways.enforcing`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ContractPolicy is a hook enforcing per-session contracts: tool-call budgets,
// scoped capabilities, allowed paths and per-sender rate limits.
type ContractPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`
	// spec is the desired behaviour.
	// +required
	Spec ContractPolicySpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// ContractPolicyList contains a list of ContractPolicy.
type ContractPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []ContractPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &ContractPolicy{}, &ContractPolicyList{})
		return nil
	})
}
