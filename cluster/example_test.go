package cluster_test

import (
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit/cluster"
)

func ExampleAPIServer() {
	for _, u := range []string{
		"https://API.example.com:443/",
		"https://api.example.com:6443",
		"https://rancher.example.com/k8s/clusters/c-abc/",
		"https://admin:secret@[2001:db8::1]:6443?timeout=5s",
		"http://localhost:8080",
		"10.0.0.1:6443",
	} {
		s, err := cluster.APIServer(u)
		fmt.Println(s, err)
	}
	// Output:
	// api.example.com <nil>
	// api.example.com:6443 <nil>
	// rancher.example.com/k8s/clusters/c-abc <nil>
	// [2001:db8::1]:6443 <nil>
	// http://localhost:8080 <nil>
	// 10.0.0.1:6443 <nil>
}

func ExampleAPIServerFor() {
	// Two configurations for the same server with different credentials
	// share one budget.
	a := &rest.Config{Host: "https://api.example.com", BearerToken: "token-of-a"}
	b := &rest.Config{Host: "https://API.EXAMPLE.COM:443", Username: "b", Password: "secret"}

	ka, _ := cluster.APIServerFor(a)
	kb, _ := cluster.APIServerFor(b)
	fmt.Println(cluster.Key("default", ka))
	fmt.Println(cluster.Key("default", kb))
	// Output:
	// k8s:default:api.example.com
	// k8s:default:api.example.com
}

func ExampleKey() {
	fmt.Println(cluster.Key("payments", "rancher.example.com/k8s/clusters/c-abc"))
	// Output: k8s:payments:rancher.example.com/k8s/clusters/c-abc
}
