package decided_test

import (
	"fmt"
	"time"

	"github.com/k8sratelimit/k8sratelimit/internal/decided"
)

// Two requests per 100ms: a third request 90ms after the first is caught
// even though each decision is only known to within a millisecond.
func ExampleTightest() {
	var r decided.Recorder
	t0 := time.Now()
	for _, at := range []time.Duration{0, 10 * time.Millisecond, 90 * time.Millisecond} {
		r.Add(t0.Add(at), t0.Add(at+time.Millisecond))
	}
	c, _ := decided.Tightest(r.Spans(), 3)
	fmt.Println(c.Within, c.Within >= 100*time.Millisecond)
	// Output: 91ms false
}
