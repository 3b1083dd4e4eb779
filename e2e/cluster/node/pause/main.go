// Command pause is the pod sandbox's process in the e2e suite's node: it holds the pod's
// namespaces until the kubelet stops the sandbox, and, as PID 1 of a pod that shares its
// process namespace, reaps whatever is re-parented to it. Built here so the node needs no
// registry (the sandbox image of containerd's CRI configuration).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
