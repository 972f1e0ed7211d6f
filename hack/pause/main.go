// Command pause is the sandbox ("pause") image of the local e2e cluster: it
// holds a pod's namespaces open, reaps the orphans that end up as its
// children, and exits on SIGINT or SIGTERM. Built statically and packed FROM
// scratch by hack/imagetar, because upstream images cannot be pulled here.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
