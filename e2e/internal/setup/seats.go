package setup

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// NominalSeats returns the number of seats the API server gives the
// priority level of t, from its apiserver_flowcontrol_nominal_limit_seats
// metric, read with the admin clientset cs.
func (t *Throttle) NominalSeats(ctx context.Context, cs kubernetes.Interface) (int, error) {
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	prefix := fmt.Sprintf(`apiserver_flowcontrol_nominal_limit_seats{priority_level=%q}`, t.PriorityLevel.Name)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		value, ok := strings.CutPrefix(sc.Text(), prefix+" ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: %w", prefix, err)
		}
		return int(f), nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("the API server reports no %s", prefix)
}
