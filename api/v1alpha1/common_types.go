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
)

// Condition types set on every policy kind.
const (
	// ConditionAccepted is True when the spec compiles into a hook.
	ConditionAccepted = "Accepted"
	// ConditionEnforced is True when every selected gateway enforces the current generation.
	ConditionEnforced = "Enforced"
	// ConditionDegraded is True on a PluginHook whose plugin keeps failing (circuit open).
	ConditionDegraded = "Degraded"
	// ConditionWarning is True on an accepted policy with findings worth a
	// look, such as an AutonomyPolicy allow-list entry that lets an agent
	// run arbitrary programs; absent when there are none.
	ConditionWarning = "Warning"
)

// Condition reasons.
const (
	// ReasonCompiled means the spec compiled into a hook.
	ReasonCompiled = "Compiled"
	// ReasonInvalidGlob means a glob pattern in the spec does not parse.
	ReasonInvalidGlob = "InvalidGlob"
	// ReasonInvalidPath means a path in the spec is not usable (relative root, NUL byte, ...).
	ReasonInvalidPath = "InvalidPath"
	// ReasonInvalidSpec means the spec is rejected for another reason named in the message.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonAllGatewaysEnforcing means every selected gateway acknowledged the current generation.
	ReasonAllGatewaysEnforcing = "AllGatewaysEnforcing"
	// ReasonPending means some selected gateways have not acknowledged the current generation yet.
	ReasonPending = "Pending"
	// ReasonNoGateways means the gateway selector matches no gateway pod.
	ReasonNoGateways = "NoGateways"
	// ReasonPluginHealthy means no gateway reports the plugin failing.
	ReasonPluginHealthy = "PluginHealthy"
	// ReasonCircuitOpen means some gateway stopped calling the plugin after repeated failures.
	ReasonCircuitOpen = "CircuitOpen"
	// ReasonArbitraryPrograms means a shell allow-list entry lets an agent run arbitrary programs.
	ReasonArbitraryPrograms = "ArbitraryPrograms"
)

// EnforcementAction says what a policy does with a call it would deny.
// +kubebuilder:validation:Enum=Deny;Warn
type EnforcementAction string

const (
	// EnforcementDeny stops the call.
	EnforcementDeny EnforcementAction = "Deny"
	// EnforcementWarn records the would-be denial (an Event and an audit record) and lets the call proceed.
	EnforcementWarn EnforcementAction = "Warn"
)

// GatewayCounts counts the gateway pods a policy selects and how many enforce it.
type GatewayCounts struct {
	// selected is the number of gateway pods the policy's gatewaySelector matches.
	// +optional
	Selected int32 `json:"selected"`
	// enforcing is the number of selected pods that acknowledged a configuration
	// including the policy's current generation.
	// +optional
	Enforcing int32 `json:"enforcing"`
}

// PolicyStatus is the observed state shared by every policy kind.
type PolicyStatus struct {
	// observedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions are Accepted, Enforced and (PluginHook only) Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// gateways counts the selected and enforcing gateway pods.
	// +optional
	Gateways GatewayCounts `json:"gateways,omitzero"`
}

// Subjects selects the calls a policy binds. A call is bound when every non-empty
// list matches it; empty subjects bind every call. As a RoleBinding's subjects say
// whom a role applies to, callers say whom the policy applies to.
type Subjects struct {
	// sessions are globs of session ids (doublestar syntax: "*" stays within a
	// "/"-separated segment, "**" crosses segments).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	Sessions []string `json:"sessions,omitempty"`
	// channels are globs of channel ids (for example "slack", "mcp").
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	Channels []string `json:"channels,omitempty"`
	// senders are globs of the verified caller's username. Kept for compatibility:
	// prefer callers, which name ServiceAccounts, users and groups exactly.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	Senders []string `json:"senders,omitempty"`
	// callers are verified identities, as the subjects of a RoleBinding; a call
	// matches when its caller is any one of them. Names are exact, never globs: to
	// bind every ServiceAccount of a namespace, name the Group
	// "system:serviceaccounts:<namespace>". A call without a verified caller matches
	// none.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Callers []CallerSubject `json:"callers,omitempty"`
}

// CallerKind is the kind of a verified caller a policy names.
// +kubebuilder:validation:Enum=ServiceAccount;User;Group
type CallerKind string

const (
	// CallerServiceAccount is a Kubernetes ServiceAccount: the caller whose username
	// is "system:serviceaccount:<namespace>:<name>".
	CallerServiceAccount CallerKind = "ServiceAccount"
	// CallerUser is a verified username, matched exactly.
	CallerUser CallerKind = "User"
	// CallerGroup is a group of the verified caller, matched exactly.
	CallerGroup CallerKind = "Group"
)

// CallerSubject names one verified caller.
// +kubebuilder:validation:XValidation:rule="self.kind == 'ServiceAccount' || !has(self.namespace)",message="namespace is only for kind ServiceAccount"
type CallerSubject struct {
	// kind is ServiceAccount, User or Group.
	// +required
	Kind CallerKind `json:"kind"`
	// name is the ServiceAccount's name, the username or the group, exactly.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Name string `json:"name"`
	// namespace is the ServiceAccount's namespace; it defaults to the policy's own
	// namespace. Only for kind ServiceAccount.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}
