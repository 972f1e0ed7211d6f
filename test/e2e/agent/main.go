// Command agent is the end-to-end suite's agent: run in a pod, it makes one
// tool call to a gateway as the pod's ServiceAccount, presenting the
// projected token the kubelet wrote into the pod, and prints the gateway's
// answer. hack/e2e.sh packs it into an image FROM scratch.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	gateway := flag.String("gateway", "", "the gateway's host:port (required)")
	tokenFile := flag.String("token-file", "", "the projected ServiceAccount token to present (required)")
	tool := flag.String("tool", "read_file", "the tool to call")
	args := flag.String("args", "{}", "the tool's arguments, a JSON object")
	session := flag.String("session", "e2e-agent", "the session id")
	flag.Parse()
	if err := run(*gateway, *tokenFile, *tool, *args, *session); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func run(gateway, tokenFile, tool, args, session string) error {
	if gateway == "" || tokenFile == "" {
		return fmt.Errorf("--gateway and --token-file are required")
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]any{"sessionId": session, "channelId": "e2e", "tool": tool, "arguments": json.RawMessage(args)})
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+gateway+"/v1/tool-calls", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, answer)
	}
	_, err = os.Stdout.Write(append(bytes.TrimSpace(answer), '\n'))
	return err
}
