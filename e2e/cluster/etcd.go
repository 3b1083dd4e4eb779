package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/embed"
)

func etcdVersion() string { return version.Version }

// runEtcd runs a single-member etcd through etcd's embed package, with the few
// flags the harness needs, until SIGINT or SIGTERM.
func runEtcd(args []string) int {
	flags := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := flags.String("data-dir", "default.etcd", "directory of the member's data")
	clientURLs := flags.String("listen-client-urls", "http://127.0.0.1:2379", "comma-separated URLs to serve clients on")
	peerURLs := flags.String("listen-peer-urls", "http://127.0.0.1:2380", "comma-separated URLs to serve peers on")
	quotaBytes := flags.Int64("quota-backend-bytes", 0, "backend size quota (0: etcd's default)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Name = "informant-e2e"
	cfg.Dir = *dataDir
	cfg.LogLevel = "warn"
	cfg.QuotaBackendBytes = *quotaBytes
	var err error
	if cfg.ListenClientUrls, err = parseURLs(*clientURLs); err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 2
	}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	if cfg.ListenPeerUrls, err = parseURLs(*peerURLs); err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 2
	}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		fmt.Fprintln(os.Stderr, "etcd: not ready after 60s")
		return 1
	}
	fmt.Fprintf(os.Stderr, "etcd %s ready, serving clients on %s\n", version.Version, *clientURLs)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-signals:
		return 0
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 1
	}
}

func parseURLs(list string) ([]url.URL, error) {
	var urls []url.URL
	for _, s := range strings.Split(list, ",") {
		u, err := url.Parse(s)
		if err != nil {
			return nil, err
		}
		urls = append(urls, *u)
	}
	return urls, nil
}
