package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinDirEnv names the variable that points the suite at the directory
// holding the etcd and kube-apiserver binaries. `make e2e` sets it.
const BinDirEnv = "K8SRATELIMIT_E2E_BIN"

// Binary names, as envtest expects them too.
const (
	EtcdBinary      = "etcd"
	APIServerBinary = "kube-apiserver"
)

// ErrNoBinaries is returned by LocateBinaries when no directory holds both
// binaries.
var ErrNoBinaries = errors.New("the etcd and kube-apiserver binaries were not found: " +
	"run `make e2e` from the repository root, which builds them once into " +
	"$K8SRATELIMIT_E2E_CACHE (default ~/.cache/k8sratelimit-e2e) and runs the suite")

// LocateBinaries returns the directory holding both binaries: the one
// named by K8SRATELIMIT_E2E_BIN, else by KUBEBUILDER_ASSETS, else the cache
// directory that hack/build-binaries.sh (found from moduleDir, the e2e
// module's root) filled on an earlier run. A variable that is set must
// name a directory with both binaries.
func LocateBinaries(moduleDir string) (string, error) {
	for _, name := range []string{BinDirEnv, "KUBEBUILDER_ASSETS"} {
		dir := os.Getenv(name)
		if dir == "" {
			continue
		}
		if err := checkBinaries(dir); err != nil {
			return "", fmt.Errorf("%s=%s: %w", name, dir, err)
		}
		return dir, nil
	}
	out, err := exec.Command(filepath.Join(moduleDir, "hack", "build-binaries.sh"), "--locate").Output()
	if err != nil {
		return "", ErrNoBinaries
	}
	dir := strings.TrimSpace(string(out))
	if err := checkBinaries(dir); err != nil {
		return "", ErrNoBinaries
	}
	return dir, nil
}

// checkBinaries reports whether dir holds both binaries, executable.
func checkBinaries(dir string) error {
	for _, name := range []string{EtcdBinary, APIServerBinary} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("%w (%v)", ErrNoBinaries, err)
		}
		if fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%w (%s is not executable)", ErrNoBinaries, name)
		}
	}
	return nil
}
