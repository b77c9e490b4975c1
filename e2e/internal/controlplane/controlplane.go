// Package controlplane runs a real etcd and kube-apiserver on loopback
// ports for the end-to-end suite: generated keys, static-token users, and
// a clean stop of both processes by pid.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
)

// AdminUser is the name of the admin user every control plane has.
const AdminUser = "e2e-admin"

// Options says what a control plane is started with.
type Options struct {
	// BinDir holds the etcd and kube-apiserver binaries.
	BinDir string
	// Users are the ordinary users to create besides the admin, each with
	// its own token and every one a member of UserGroup.
	Users []string
	// UserGroup is the group of every user in Users.
	UserGroup string
}

// ControlPlane is a running etcd and kube-apiserver.
type ControlPlane struct {
	dir       string
	etcd      *process
	apiServer *apiServer
	users     map[string]User
}

// Start starts etcd and kube-apiserver with their files in a new temporary
// directory and returns once the API server is ready. On error nothing is
// left running.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	dir, err := os.MkdirTemp("", "k8sratelimit-e2e-")
	if err != nil {
		return nil, err
	}
	c := &ControlPlane{dir: dir, users: make(map[string]User)}
	if err := c.start(ctx, opts); err != nil {
		return nil, fmt.Errorf("starting the control plane (files and logs in %s): %w", dir, errors.Join(err, c.Stop()))
	}
	return c, nil
}

// start creates the users and starts both processes.
func (c *ControlPlane) start(ctx context.Context, opts Options) error {
	admin, err := newUser(AdminUser, AdminGroup)
	if err != nil {
		return err
	}
	users := []User{admin}
	for _, name := range opts.Users {
		u, err := newUser(name, opts.UserGroup)
		if err != nil {
			return err
		}
		users = append(users, u)
	}
	for _, u := range users {
		c.users[u.Name] = u
	}
	tokenFile := filepath.Join(c.dir, "tokens.csv")
	if err := writeTokenFile(tokenFile, users); err != nil {
		return err
	}
	var etcdURL string
	c.etcd, etcdURL, err = startEtcd(ctx, filepath.Join(opts.BinDir, EtcdBinary), c.dir)
	if err != nil {
		return err
	}
	c.apiServer, err = startAPIServer(ctx, filepath.Join(opts.BinDir, APIServerBinary), c.dir, etcdURL, tokenFile, admin)
	return err
}

// Dir returns the directory holding the control plane's files and logs.
func (c *ControlPlane) Dir() string { return c.dir }

// Pids returns the process ids of etcd and kube-apiserver.
func (c *ControlPlane) Pids() (etcd, apiServer int) {
	return c.etcd.Pid(), c.apiServer.proc.Pid()
}

// URL returns the API server's URL.
func (c *ControlPlane) URL() string { return c.apiServer.url }

// AdminConfig returns a fresh client configuration for the admin user.
func (c *ControlPlane) AdminConfig() *rest.Config {
	return c.apiServer.config(c.users[AdminUser])
}

// UserConfig returns a fresh client configuration for the named user,
// which must be one of Options.Users.
func (c *ControlPlane) UserConfig(name string) *rest.Config {
	u, ok := c.users[name]
	if !ok {
		panic(fmt.Sprintf("controlplane: no user %q", name))
	}
	return c.apiServer.config(u)
}

// Stop stops kube-apiserver, then etcd, by pid. It keeps the directory
// with the logs; RemoveFiles deletes it.
func (c *ControlPlane) Stop() error {
	var errs []error
	if c.apiServer != nil {
		errs = append(errs, c.apiServer.proc.stop())
	}
	if c.etcd != nil {
		errs = append(errs, c.etcd.stop())
	}
	return errors.Join(errs...)
}

// RemoveFiles deletes the control plane's directory. Call it after Stop.
func (c *ControlPlane) RemoveFiles() error { return os.RemoveAll(c.dir) }
