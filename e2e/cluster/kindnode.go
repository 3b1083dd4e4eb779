//go:build kindnode

// The components the kind node image runs besides the harnesses' (e2e/kind-node.sh builds
// `go build -tags kindnode`): kind execs kubeadm and kubectl in the node, and kubeadm's etcd
// static pod passes etcd's whole flag set, which etcd's own command line reads.

package main

import (
	"os"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubeadm "k8s.io/kubernetes/cmd/kubeadm/app"
	kubeadmerrors "k8s.io/kubernetes/cmd/kubeadm/app/util/errors"
)

func init() {
	components["kubectl"] = func() *cobra.Command { return kubectl.NewDefaultKubectlCommand() }
	// kubeadm's own main: klog's flags as kubeadm exposes them, its error handling and exit code.
	argvComponents["kubeadm"] = func(args []string) {
		os.Args = append([]string{"kubeadm"}, args...)
		kubeadmerrors.HandleError(kubeadm.Run())
	}
	// etcd's own command line (every flag of etcd's static pod that kubeadm writes); `etcd`
	// stays the harness's single member.
	argvComponents["etcdmain"] = func(args []string) { etcdmain.Main(append([]string{"etcd"}, args...)) }
	usage = "usage: cluster {etcd|etcdmain|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kubeadm|kubectl|version} [flags]"
}
