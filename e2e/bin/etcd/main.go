// Command etcd runs the etcd server at the version pinned in go.mod. The
// end-to-end suite builds it once and starts it on a loopback port.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
