// Command dns is the cluster DNS of the e2e suite's node: CoreDNS's own server, linked with
// only the plugins the node's Corefile uses (errors, health, ready, kubernetes, forward, cache,
// loop, reload, loadbalance; prometheus too, for the Corefile kubeadm writes in the kind node of
// e2e/kind-node.sh), as CoreDNS documents for builds with a chosen plugin set. The server
// orders them by its own directive list; a plugin not linked is unknown to the Corefile.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
