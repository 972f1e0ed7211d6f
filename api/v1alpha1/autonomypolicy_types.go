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

// AutonomyMode is how much an agent may change on its own.
// +kubebuilder:validation:Enum=Full;Supervised;ReadOnly
type AutonomyMode string

const (
	// AutonomyFull allows every tool the other rules allow.
	AutonomyFull AutonomyMode = "Full"
	// AutonomySupervised is enforced like Full; it marks agents a human supervises.
	AutonomySupervised AutonomyMode = "Supervised"
	// AutonomyReadOnly denies every tool not known to be read-only.
	AutonomyReadOnly AutonomyMode = "ReadOnly"
)

// Workspace is the directory an agent works in.
// +kubebuilder:validation:XValidation:rule="!has(self.only) || !self.only || self.root.startsWith('/')",message="workspace.only needs an absolute workspace.root"
type Workspace struct {
	// root is the workspace directory on the gateway; relative tool paths resolve against it.
	// The gateway's own workspace (its --workspace flag) is the source of truth: root must
	// name that directory, and a gateway whose workspace is another one cannot enforce the
	// policy and denies every call (rule policyUnenforceable), naming both directories.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Root string `json:"root"`
	// only confines every path a tool names to the workspace root (symlinks resolved).
	// +optional
	Only bool `json:"only,omitempty"`
}

// ShellPolicy controls the shell tool.
// +kubebuilder:validation:XValidation:rule="!has(self.allowedCommands) || size(self.allowedCommands) == 0 || (has(self.allow) && self.allow)",message="shell.allowedCommands has no effect unless shell.allow is true"
type ShellPolicy struct {
	// allow permits the shell tool at all; false denies every shell call.
	// +optional
	Allow bool `json:"allow,omitempty"`
	// allowedCommands are globs every simple command of a shell call must match
	// (for example "git *", "go test *"); ["*"] allows every command. Empty denies all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	AllowedCommands []string `json:"allowedCommands,omitempty"`
	// dialects are the shell languages every command is read in: "bash"
	// (GNU bash) and "posix" (POSIX sh as dash reads it). A command is
	// denied when any reading breaks the policy or does not parse, so
	// bash-only syntax (process substitution, [[ ]], <<<, the function
	// keyword) is denied unless only bash is listed. Empty means both.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:Enum=bash;posix
	Dialects []ShellDialect `json:"dialects,omitempty"`
}

// ShellDialect is a shell language: bash or posix.
type ShellDialect string

// Shell dialects.
const (
	// ShellDialectBash is GNU bash's language.
	ShellDialectBash ShellDialect = "bash"
	// ShellDialectPOSIX is POSIX sh as dash reads it.
	ShellDialectPOSIX ShellDialect = "posix"
)

// ToolPathArguments names the arguments of one tool that carry paths.
type ToolPathArguments struct {
	// tool is the exact tool name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Tool string `json:"tool"`
	// keys are the top-level argument names holding a path or an array of paths.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	Keys []string `json:"keys"`
}

// ToolRules allows and denies tools by name.
type ToolRules struct {
	// allow are globs of tool names that may be called; empty allows every tool.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	Allow []string `json:"allow,omitempty"`
	// deny are globs of tool names that may never be called; deny wins over allow.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	Deny []string `json:"deny,omitempty"`
	// readOnly names extra tools that ReadOnly mode treats as read-only.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	ReadOnly []string `json:"readOnly,omitempty"`
	// pathArguments names, per tool, the arguments that carry paths.
	// +optional
	// +listType=map
	// +listMapKey=tool
	// +kubebuilder:validation:MaxItems=256
	PathArguments []ToolPathArguments `json:"pathArguments,omitempty"`
}

// ProtectedPaths changes the default set of protected paths: configuration
// that makes the programs a policy allows run other programs (git's config,
// hooks and attributes, .envrc, .npmrc, ...). No tool and no program a tool
// starts may write, create, rename or remove a protected path; reading it
// stays allowed. The default set, each entry with its reason, is the
// autonomy package's DefaultProtected table (internal/hooks/autonomy/protected.go),
// listed in the README's security model.
// +kubebuilder:validation:XValidation:rule="!has(self.add) || !has(self.lift) || self.lift.all(n, !(n in self.add))",message="protectedPaths names the same path in add and lift"
type ProtectedPaths struct {
	// add are extra path globs (doublestar syntax) protected like the
	// default set. A glob matches what it names, anchored as
	// forbiddenPathGlobs are (a name without a slash in any directory);
	// "dir/**" covers a directory and everything in it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	Add []string `json:"add,omitempty"`
	// lift names entries of the default set (for example ".git/config",
	// ".envrc") this policy does not protect; a name that is not an entry
	// is a validation error (Accepted=False). Where several policies bind
	// a call, a path is protected when any of them protects it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Lift []string `json:"lift,omitempty"`
	// allowGitPrograms lets git, in the programs the tools start, run the
	// programs its configuration names: external diff, textconv, fsmonitor,
	// hooks, pager and credential helpers, which are off otherwise (and a
	// script may not set the variables that turn them back on). Where
	// several policies bind a call, every one of them must allow it.
	// +optional
	AllowGitPrograms bool `json:"allowGitPrograms,omitempty"`
}

// AutonomyPolicySpec is what an agent may do on its own.
type AutonomyPolicySpec struct {
	// subjects selects the calls (by session, channel, sender and verified caller) this
	// policy binds; empty binds every call. A call it does not bind is not restricted
	// by this policy: neither before it runs, nor while it runs, nor in tool listings.
	// When every policy of a gateway has subjects, a call that none of them
	// binds is denied (rule noPolicyBindsCaller).
	// +optional
	Subjects *Subjects `json:"subjects,omitempty"`
	// mode is Full, Supervised or ReadOnly.
	// +optional
	// +kubebuilder:default=Full
	Mode AutonomyMode `json:"mode,omitempty"`
	// workspace is the agent's workspace and whether paths are confined to it.
	// +optional
	Workspace *Workspace `json:"workspace,omitempty"`
	// forbiddenPathGlobs are path globs (doublestar syntax) no tool may touch,
	// matched against the path as given and its resolved real path.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	ForbiddenPathGlobs []string `json:"forbiddenPathGlobs,omitempty"`
	// protectedPaths changes the default set of protected paths, which
	// applies when it is omitted: configuration that makes allowed programs
	// run other programs (git's config, hooks and attributes, .envrc,
	// .npmrc, ...), which no tool and no program a tool starts may write;
	// reading stays allowed. The default set is the DefaultProtected table
	// of internal/hooks/autonomy/protected.go, listed with each entry's
	// reason in the README's security model.
	// +optional
	ProtectedPaths *ProtectedPaths `json:"protectedPaths,omitempty"`
	// shell controls the shell tool.
	// +optional
	Shell *ShellPolicy `json:"shell,omitempty"`
	// tools allows and denies tools by name.
	// +optional
	Tools *ToolRules `json:"tools,omitempty"`
	// ask names the calls that need a person's approval (a ToolCallApproval)
	// before they run: by tool, path or shell command.
	// +optional
	Ask *AskRules `json:"ask,omitempty"`
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
// +kubebuilder:resource:shortName=ap,categories=toolhooks
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.enforcementAction`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Enforced",type=string,JSONPath=`.status.conditions[?(@.type=="Enforced")].status`
// +kubebuilder:printcolumn:name="Gateways",type=integer,JSONPath=`.status.gateways.selected`
// +kubebuilder:printcolumn:name="Enforcing",type=integer,JSONPath=`.status.gateways.enforcing`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// AutonomyPolicy is a hook that gates what an agent may do on its own: read-only
// mode, workspace confinement, forbidden paths and a shell allow-list.
type AutonomyPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`
	// spec is the desired behaviour.
	// +required
	Spec AutonomyPolicySpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// AutonomyPolicyList contains a list of AutonomyPolicy.
type AutonomyPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []AutonomyPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &AutonomyPolicy{}, &AutonomyPolicyList{})
		return nil
	})
}
