// Command quickstart lists the pods of a namespace through a client whose
// requests share the process's budget for their API server. It is the
// README's Quick start.
package main

import (
	"context"
	"fmt"
	"log"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/k8sratelimit/k8sratelimit"
)

func main() {
	rc, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		log.Fatal(err)
	}
	if err := k8sratelimit.Configure(rc); err != nil { // the one line
		log.Fatal(err) // an invalid KUBERNETES_RATELIMIT* variable, named
	}
	clientset := kubernetes.NewForConfigOrDie(rc) // and dynamic, discovery, informers...
	pods, err := clientset.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(pods.Items), "pods in default")
}
