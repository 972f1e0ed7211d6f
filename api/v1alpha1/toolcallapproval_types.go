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

// AskRules name the calls of an AutonomyPolicy that need a person's approval
// before they run. Deny still wins over ask, and ask over allow: a call this
// policy would deny is denied without asking.
type AskRules struct {
	// tools are globs of tool names whose every call needs approval.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	Tools []string `json:"tools,omitempty"`
	// pathGlobs are path globs (doublestar syntax): a call that touches a
	// matching path (as given or resolved) needs approval.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	PathGlobs []string `json:"pathGlobs,omitempty"`
	// commands are globs of shell commands, matched like shell.allowedCommands:
	// a shell call running a matching command needs approval.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	Commands []string `json:"commands,omitempty"`
	// expiry is how long a request for approval stays open before it is denied
	// as expired (default 10m, at most 24h).
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('24h')",message="expiry must be more than 0s and at most 24h"
	Expiry *metav1.Duration `json:"expiry,omitempty"`
}

// ApprovalState is where a ToolCallApproval stands.
// +kubebuilder:validation:Enum=Pending;Approved;Denied;Expired;Used
type ApprovalState string

const (
	// ApprovalPending waits for a decision.
	ApprovalPending ApprovalState = "Pending"
	// ApprovalApproved admits the one call it describes, once, before it expires.
	ApprovalApproved ApprovalState = "Approved"
	// ApprovalDenied refuses the call.
	ApprovalDenied ApprovalState = "Denied"
	// ApprovalExpired was not decided in time; the call is denied.
	ApprovalExpired ApprovalState = "Expired"
	// ApprovalUsed was approved and has admitted its call; it admits no other.
	ApprovalUsed ApprovalState = "Used"
)

// Condition types of a ToolCallApproval.
const (
	ConditionApproved = "Approved"
	ConditionDenied   = "Denied"
	ConditionExpired  = "Expired"
	ConditionUsed     = "Used"
)

// ReasonExpired is the reason of the Expired condition the controller sets
// on a Pending approval once its spec.expiresAt passed.
const ReasonExpired = "Expired"

// AnnotationAnnounced records the decision (Approved, Denied or Expired) the
// controller has recorded Events for, so each is announced once.
const AnnotationAnnounced = "policy.toolhooks.dev/announced"

// Reasons of the conditions a gateway sets on a ToolCallApproval.
const (
	// ReasonAdmitted (condition Used): a gateway admitted the approved call.
	ReasonAdmitted = "Admitted"
	// ReasonNotDecided (condition Expired): nobody decided before expiresAt.
	ReasonNotDecided = "NotDecided"
)

// CallLabel labels a ToolCallApproval with the key of the call it
// describes (hex of a SHA-256 over its sender, session, tool, arguments
// digest, asking policy uid and rule), so gateways find the request of a
// retried call.
const CallLabel = "policy.toolhooks.dev/call"

// ApprovalVerb is the RBAC verb on toolcallapprovals that lets a user
// approve or deny them.
const ApprovalVerb = "approve"

// AskingPolicy names the policy and rule that asked for approval.
type AskingPolicy struct {
	// kind is AutonomyPolicy or ContractPolicy.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// name is the policy's name, in the approval's namespace.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid is the policy's uid.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	UID string `json:"uid,omitempty"`
	// rule is the rule that asked.
	// +required
	// +kubebuilder:validation:MaxLength=128
	Rule string `json:"rule"`
	// reason is the rule's explanation of why it asked.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// ApprovalSender is the verified identity that made the call.
type ApprovalSender struct {
	// username is the caller's verified username.
	// +required
	// +kubebuilder:validation:MaxLength=512
	Username string `json:"username"`
	// uid is the caller's uid, when its authenticator gives one.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	UID string `json:"uid,omitempty"`
	// groups are the caller's groups.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	Groups []string `json:"groups,omitempty"`
}

// ArgumentPreview is one argument of the call, as a person reviews it: paths
// and commands as given, values that look like secrets masked.
type ArgumentPreview struct {
	// name is the argument's key.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// value is the argument's value as JSON, masked or shortened where needed.
	// +required
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value"`
}

// ToolCallApprovalSpec describes the one call a person is asked to approve.
// It is written by the gateway that asked and never changes.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type ToolCallApprovalSpec struct {
	// policy is the policy and rule that asked.
	// +required
	Policy AskingPolicy `json:"policy"`
	// sender is the verified identity that made the call; it may not approve it.
	// +required
	Sender ApprovalSender `json:"sender"`
	// session is the call's session id.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Session string `json:"session,omitempty"`
	// tool is the tool called.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Tool string `json:"tool"`
	// argumentsDigest is "sha256:" and the hex SHA-256 of the call's canonical
	// arguments (JSON with sorted keys): the approval admits only a call with
	// exactly these arguments.
	// +required
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	ArgumentsDigest string `json:"argumentsDigest"`
	// arguments preview the call's arguments for the person deciding.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Arguments []ArgumentPreview `json:"arguments,omitempty"`
	// gateway is the gateway pod that asked.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Gateway string `json:"gateway,omitempty"`
	// expiresAt is when the request is denied as expired if nobody decided it.
	// +required
	ExpiresAt metav1.Time `json:"expiresAt"`
}

// ToolCallApprovalStatus is the decision on a ToolCallApproval.
type ToolCallApprovalStatus struct {
	// state is Pending, Approved, Denied, Expired or Used.
	// +optional
	State ApprovalState `json:"state,omitempty"`
	// decidedBy is the user who approved or denied the call.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	DecidedBy string `json:"decidedBy,omitempty"`
	// decidedByGroups are groups the API server knew decidedBy by when they
	// decided; a gateway checks the approve verb for that user and these
	// groups, so that approvers authorised through a group are honoured.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	DecidedByGroups []string `json:"decidedByGroups,omitempty"`
	// usedBy is the gateway pod that admitted the approved call.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	UsedBy string `json:"usedBy,omitempty"`
	// conditions are Approved, Denied, Expired and Used, each with who or what
	// set it and why in its message.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tca,categories=toolhooks
// +kubebuilder:printcolumn:name="Tool",type=string,JSONPath=`.spec.tool`
// +kubebuilder:printcolumn:name="Sender",type=string,JSONPath=`.spec.sender.username`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policy.name`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Expires",type=string,format=date-time,JSONPath=`.spec.expiresAt`

// ToolCallApproval asks a person to approve one tool call that a policy marked
// as needing approval. Gateways create it; a user holding the "approve" verb
// on toolcallapprovals decides it with kubectl toolhooks approve or deny.
type ToolCallApproval struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`
	// spec is the call to decide.
	// +required
	Spec ToolCallApprovalSpec `json:"spec"`
	// status is the decision.
	// +optional
	Status ToolCallApprovalStatus `json:"status,omitzero"`
}

// CurrentState is the approval's state: Pending until a status says otherwise.
func (a *ToolCallApproval) CurrentState() ApprovalState {
	if a.Status.State == "" {
		return ApprovalPending
	}
	return a.Status.State
}

// +kubebuilder:object:root=true

// ToolCallApprovalList contains a list of ToolCallApproval.
type ToolCallApprovalList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []ToolCallApproval `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &ToolCallApproval{}, &ToolCallApprovalList{})
		return nil
	})
}
