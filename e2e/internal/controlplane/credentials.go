package controlplane

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
)

// writeServiceAccountKey writes a new RSA private key, PEM-encoded, to
// path. The API server signs and verifies service account tokens with it.
func writeServiceAccountKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating the service account key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// User is a user the API server knows by a static bearer token.
type User struct {
	Name   string
	Groups []string
	Token  string
}

// AdminGroup is the group of the admin user: RBAC lets it do anything, and
// API Priority and Fairness exempts it.
const AdminGroup = "system:masters"

// newUser returns a user with a random token.
func newUser(name string, groups ...string) (User, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return User{}, err
	}
	return User{Name: name, Groups: groups, Token: hex.EncodeToString(b)}, nil
}

// writeTokenFile writes users to path in the format of the API server's
// --token-auth-file: token,user,uid,"group1,group2".
func writeTokenFile(path string, users []User) error {
	var b strings.Builder
	for _, u := range users {
		fmt.Fprintf(&b, "%s,%s,%s,%q\n", u.Token, u.Name, u.Name, strings.Join(u.Groups, ","))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}
