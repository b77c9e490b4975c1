package controlplane

import (
	"fmt"
	"net"
)

// freePort returns a TCP port on 127.0.0.1 that nothing listens on at the
// moment of the call.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
