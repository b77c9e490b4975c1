// Command quickstart lists the pods of a namespace through a client whose
// requests share the process's budget for their API server.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/k8sratelimit/k8sratelimit"
)

func main() {
	kubeconfig := flag.String("kubeconfig", clientcmd.RecommendedHomeFile, "kubeconfig file")
	flag.Parse()

	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	// The one line: every client built from rc, and from any other
	// rest.Config for the same API server, now shares one budget
	// (KUBERNETES_RATELIMIT*: 400 requests per minute by default).
	if err := k8sratelimit.Configure(rc); err != nil {
		log.Fatal(err) // an invalid KUBERNETES_RATELIMIT* variable, named
	}
	clientset, err := kubernetes.NewForConfig(rc) // and dynamic, discovery, informers...
	if err != nil {
		log.Fatal(err)
	}
	pods, err := clientset.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(pods.Items), "pods in default")
}
