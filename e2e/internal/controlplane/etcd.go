package controlplane

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// startEtcd starts a single-member etcd on free loopback ports, with its
// data in dir, and returns it with its client URL once it is healthy.
func startEtcd(ctx context.Context, bin, dir string) (*process, string, error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	args := []string{
		"--name=e2e",
		"--data-dir=" + filepath.Join(dir, "etcd-data"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=e2e=" + peerURL,
		"--unsafe-no-fsync=true", // the data is thrown away after the run
		"--log-level=warn",
	}
	p, err := startProcess("etcd", bin, args, dir)
	if err != nil {
		return nil, "", err
	}
	if err := waitUntil(ctx, p, func() bool { return etcdHealthy(ctx, clientURL) }); err != nil {
		p.stop()
		return nil, "", fmt.Errorf("waiting for etcd to be healthy: %w", err)
	}
	return p, clientURL, nil
}

// etcdHealthy reports whether etcd at clientURL answers its health check.
func etcdHealthy(ctx context.Context, clientURL string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
}
