// Command demo plays a short scripted agent session through real gateway
// processes enforcing the sample policies of config/samples (embedded), and
// prints each decision with its reason.
//
// By default the gateways run in standalone mode, loading the samples from
// files. With --cluster they run in cluster mode against a local envtest
// control plane (kube-apiserver and etcd) with the controller process
// pushing their configuration, and the demo ends with kubectl describe of
// the policies showing the denials as Events.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/toolhooks/toolhooks/internal/compile"
)

// flagGateway is the flag naming the gateway binary.
const flagGateway = "gateway"

// options are the command line.
type options struct {
	gateway string // the gateway binary
	manager string // the controller manager binary (--cluster)
	cluster bool
	audit   bool
	hold    bool
}

func main() {
	var o options
	flag.StringVar(&o.gateway, flagGateway, siblingBinary(flagGateway), "the gateway binary (make demo builds it)")
	flag.StringVar(&o.manager, "manager", siblingBinary("manager"), "the controller manager binary (--cluster)")
	flag.BoolVar(&o.cluster, "cluster", false, "run against a local envtest control plane with the controller pushing the policies")
	flag.BoolVar(&o.audit, "audit", false, "also print the gateways' audit records")
	flag.BoolVar(&o.hold, "hold", false, "after the session, keep everything running until Ctrl-C (to try calls by hand)")
	flag.Parse()
	// SIGPIPE too: a closed stdout (demo | head) stops the demo through its
	// cleanup instead of killing it on the spot.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	defer stop()
	out := &printer{w: os.Stdout}
	var err error
	if o.cluster {
		err = runCluster(ctx, out, o)
	} else {
		err = run(ctx, out, o)
	}
	if err == nil {
		err = out.err
	}
	if err != nil {
		if ctx.Err() != nil {
			err = errInterrupted
		}
		fmt.Fprintln(os.Stderr, "demo:", err)
		stop()
		os.Exit(1)
	}
}

// siblingBinary is name next to this executable (where make demo puts both).
func siblingBinary(name string) string {
	exe, err := os.Executable()
	if err != nil {
		return name
	}
	return filepath.Join(filepath.Dir(exe), name)
}

// demoDirs are the demo's temporary directories.
type demoDirs struct {
	root, workspace, policies string
	// tokens is the gateways' callers' tokens file (--auth-tokens-file).
	tokens string
	// approvals is the local approval service, at approvalsURL.
	approvals    *approvals
	approvalsURL string
}

// setup checks the binaries (flag name -> path), creates the workspace and
// the approval service, writes the samples for this machine into the
// policies directory and prints the header. cleanup undoes it; it is set
// even when setup fails part way.
func setup(out *printer, title string, binaries map[string]string) (d demoDirs, cleanup func(), err error) {
	var policies compile.Policies
	var undo []func()
	cleanup = func() {
		for _, u := range slices.Backward(undo) {
			u()
		}
	}
	for name, path := range binaries {
		if err = checkBinary(path, name); err != nil {
			return d, cleanup, err
		}
	}
	d.root, err = os.MkdirTemp("", "toolhooks-demo-")
	if err != nil {
		return d, cleanup, err
	}
	undo = append(undo, func() { _ = os.RemoveAll(d.root) })
	d.workspace, d.policies = filepath.Join(d.root, "workspace"), filepath.Join(d.root, "policies")
	for _, dir := range []string{d.workspace, d.policies} {
		if err = os.Mkdir(dir, 0o755); err != nil {
			return d, cleanup, err
		}
	}
	// Policies name resolved paths; the temporary directory may sit behind a symlink (macOS /var).
	if d.workspace, err = filepath.EvalSymlinks(d.workspace); err != nil {
		return d, cleanup, err
	}
	if err = seedWorkspace(d.workspace); err != nil {
		return d, cleanup, err
	}
	url, svc, stopApprovals, err := approvalService()
	if err != nil {
		return d, cleanup, err
	}
	undo = append(undo, stopApprovals)
	d.approvals, d.approvalsURL = svc, url
	if policies, err = loadSamples(d.workspace, url); err != nil {
		return d, cleanup, err
	}
	if err = writePolicies(d.policies, policies); err != nil {
		return d, cleanup, err
	}
	d.tokens = filepath.Join(d.root, "tokens.yaml")
	if err = os.WriteFile(d.tokens, []byte(demoTokensFile()), 0o600); err != nil {
		return d, cleanup, err
	}
	out.printf("toolhooks demo (%s)\n  workspace: %s\n  policies:  %s\n"+
		"  (the samples' /workspace is the workspace above; the approvals Service is a local stand-in)\n",
		title, d.workspace, policyNames(policies))
	return d, cleanup, nil
}

// run is the standalone demo: two gateways (the coding agents' and the
// auditor's) load the samples from files; the script is played through them.
func run(ctx context.Context, out *printer, o options) error {
	start := time.Now()
	d, cleanup, err := setup(out, "standalone gateways", map[string]string{flagGateway: o.gateway})
	defer cleanup()
	if err != nil {
		return err
	}

	gateways := map[string]*gatewayProcess{}
	defer func() {
		for _, g := range gateways {
			g.Stop()
		}
	}()
	for _, gw := range []struct{ name, labels string }{{gwCoding, ""}, {gwAuditor, auditorLabel}} {
		g, err := startGateway(ctx, "gateway "+gw.name, o.gateway, "--workspace", d.workspace, "--policies", d.policies,
			"--namespace", "default", "--labels", gw.labels, "--auth-tokens-file", d.tokens)
		if err != nil {
			return err
		}
		gateways[gw.name] = g
		if err := g.waitReady(ctx, 30*time.Second); err != nil {
			return err
		}
		out.printf("  gateway %-8s pid %d on %s, labels %q\n", gw.name, g.cmd.Process.Pid, g.addr, gw.labels)
	}
	out.printf("\n")
	if err := playAndSummarize(ctx, out, gateways, o.audit, start); err != nil {
		return err
	}
	hold(ctx, out, o, gateways[gwCoding].addr)
	return nil
}

// hold waits for Ctrl-C when --hold is set, saying how to make a call by hand.
func hold(ctx context.Context, out *printer, o options, addr string) {
	if !o.hold {
		return
	}
	out.printf("\nThe coding agents' gateway keeps running; try a call:\n"+
		"  curl -s -H 'Content-Type: application/json' -H 'Authorization: Bearer %s' localhost:%s/v1/tool-calls \\\n"+
		"    -d '{\"sessionId\":\"me\",\"tool\":\"read_file\",\"arguments\":{\"path\":\"config/.env\"}}'\n"+
		"Press Ctrl-C to stop and clean up.\n", demoToken(codingAgent), port(addr))
	<-ctx.Done()
	out.printf("Stopping and cleaning up.\n")
}

// port is the port of a host:port address.
func port(addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return p
}

// playAndSummarize plays the script and prints the totals and audit counts.
func playAndSummarize(ctx context.Context, out *printer, gateways map[string]*gatewayProcess, showAudit bool, start time.Time) error {
	addrs := map[string]string{}
	for name, g := range gateways {
		addrs[name] = g.addr
	}
	t, err := play(ctx, out, addrs)
	if err != nil {
		return err
	}
	records := 0
	for _, g := range gateways {
		records += g.auditRecords(callsOn(g, gateways))
	}
	out.printf("\n%d calls: %d allowed, %d denied; %d audit records written by the gateways (one per call); %.1fs\n",
		t.calls, t.allowed, t.denied, records, time.Since(start).Seconds())
	if showAudit {
		for name, g := range gateways {
			out.printf("\naudit records of gateway %s:\n%s", name, g.stdout.String())
		}
	}
	if records != t.calls {
		return fmt.Errorf("expected %d audit records, got %d", t.calls, records)
	}
	return nil
}

// callsOn is how many calls the script makes through gateway g.
func callsOn(g *gatewayProcess, gateways map[string]*gatewayProcess) int {
	n := 0
	for _, s := range script {
		if gateways[s.who.gateway] == g {
			n += max(s.times, 1)
		}
	}
	return n
}

// checkBinary explains a missing binary.
func checkBinary(path, flagName string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("the %s binary: %w (make demo builds it; or pass --%s)", flagName, err, flagName)
	}
	return nil
}
