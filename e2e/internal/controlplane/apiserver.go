package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
)

// apiServer is a running kube-apiserver.
type apiServer struct {
	proc   *process
	url    string // https://127.0.0.1:<port>
	caData []byte // PEM: the self-signed serving certificate and its CA
}

// apiServerFlags are the settings of the API server that do not depend on
// the run.
var apiServerFlags = []string{
	"--bind-address=127.0.0.1",
	"--authorization-mode=RBAC",
	"--service-cluster-ip-range=10.0.0.0/24",
	"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
	// The endpoint reconciler refuses a loopback address, and nothing here
	// needs the kubernetes Service's endpoints.
	"--endpoint-reconciler-type=none",
	"--enable-priority-and-fairness=true",
}

// startAPIServer starts kube-apiserver on a free loopback port, storing in
// etcd at etcdURL, with its certificates, keys and logs in dir and the
// users of tokenFile. It returns once /readyz answers ok to admin.
func startAPIServer(ctx context.Context, bin, dir, etcdURL, tokenFile string, admin User) (*apiServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	saKey := filepath.Join(dir, "service-account.key")
	if err := writeServiceAccountKey(saKey); err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "certs")
	args := append([]string{
		fmt.Sprintf("--secure-port=%d", port),
		"--etcd-servers=" + etcdURL,
		"--etcd-prefix=/k8sratelimit-e2e",
		"--cert-dir=" + certDir,
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--token-auth-file=" + tokenFile,
	}, apiServerFlags...)
	p, err := startProcess("kube-apiserver", bin, args, dir)
	if err != nil {
		return nil, err
	}
	s := &apiServer{proc: p, url: fmt.Sprintf("https://127.0.0.1:%d", port)}
	certFile := filepath.Join(certDir, "apiserver.crt")
	err = waitUntil(ctx, p, func() bool {
		// The server writes its certificate before it listens.
		s.caData, _ = os.ReadFile(certFile)
		return s.caData != nil && s.ready(ctx, admin)
	})
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("waiting for kube-apiserver to be ready: %w", err)
	}
	return s, nil
}

// config returns a client configuration for user.
func (s *apiServer) config(u User) *rest.Config {
	return &rest.Config{
		Host:            s.url,
		BearerToken:     u.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), s.caData...)},
	}
}

// ready reports whether /readyz answers ok to admin, verifying the
// serving certificate against caData.
func (s *apiServer) ready(ctx context.Context, admin User) bool {
	rc := s.config(admin)
	rc.Timeout = 2 * time.Second
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		return false
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
