// Command cluster is the e2e suite's control plane in one program: the first
// argument (or the name it is called by, as hyperkube and k3s do) picks the
// component. Each component is Kubernetes' (or etcd's) own code, linked once.
//
//	cluster etcd --data-dir DIR --listen-client-urls URL ...
//	cluster kube-apiserver FLAGS...
//	cluster kube-controller-manager FLAGS...
//	cluster kube-scheduler FLAGS...
//	cluster kubelet FLAGS...
//	cluster kube-proxy FLAGS...
//	cluster version
//
// Built with `-tags kindnode` (e2e/kind-node.sh: target/cluster/cluster-kind), it also has
// kubeadm, kubectl and etcd's own command line (kindnode.go), which the kind node image runs;
// the harnesses' binary goes without them (kubectl's kustomize alone adds about 80 MB).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // for CronJob time zones, as kube-apiserver's own main has it

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as each component's main
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as each component's main
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric, as each component's main
	"k8s.io/component-base/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kubeproxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var components = map[string]func() *cobra.Command{
	"kube-apiserver":          func() *cobra.Command { return apiserver.NewAPIServerCommand() },
	"kube-controller-manager": func() *cobra.Command { return controllermanager.NewControllerManagerCommand() },
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-proxy":              func() *cobra.Command { return kubeproxy.NewProxyCommand() },
}

// Components whose upstream entry point reads os.Args itself: the name they are called by, then
// their arguments (kindnode.go adds them).
var argvComponents = map[string]func(args []string){}

var usage = "usage: cluster {etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|version} [flags]"

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	_, argv := argvComponents[name]
	if _, ok := components[name]; !ok && !argv && name != "etcd" {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, usage)
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	if run, ok := argvComponents[name]; ok {
		run(args)
		return
	}
	switch name {
	case "etcd":
		os.Exit(runEtcd(args))
	case "version":
		fmt.Printf("kubernetes %s\netcd %s\n", version.Get().GitVersion, etcdVersion())
		return
	}
	newCommand, ok := components[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "cluster: unknown component %q\n%s\n", name, usage)
		os.Exit(2)
	}
	command := newCommand()
	command.SetArgs(args)
	os.Exit(cli.Run(command))
}
