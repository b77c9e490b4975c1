package setup

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// Response headers by which API Priority and Fairness tells how it
// classified a request.
const (
	FlowSchemaUIDHeader    = "X-Kubernetes-PF-FlowSchema-UID"
	PriorityLevelUIDHeader = "X-Kubernetes-PF-PriorityLevel-UID"
)

// probePath is a cheap request every test user may make.
const probePath = "/api/v1/namespaces/default"

// WaitAuthorized returns once the user of rc is served probePath, that is
// once the API server's authorizer has seen the user's role binding.
func WaitAuthorized(ctx context.Context, rc *rest.Config) error {
	return poll(ctx, rc, func(resp *http.Response) bool { return resp.StatusCode == http.StatusOK })
}

// WaitClassified returns once the API server serves the user of rc and
// puts its requests in t's flow schema, that is once its flow-control
// configuration has taken in t and its authorizer the user's role binding.
func (t *Throttle) WaitClassified(ctx context.Context, rc *rest.Config) error {
	uid := string(t.FlowSchema.UID)
	return poll(ctx, rc, func(resp *http.Response) bool {
		return resp.StatusCode == http.StatusOK && resp.Header.Get(FlowSchemaUIDHeader) == uid
	})
}

// poll sends GET probePath as the user of rc until done accepts the
// response, or ctx ends.
func poll(ctx context.Context, rc *rest.Config, done func(*http.Response) bool) error {
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rc.Host+probePath, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if done(resp) {
				return nil
			}
			last = fmt.Sprintf("%s, flow schema %q", resp.Status, resp.Header.Get(FlowSchemaUIDHeader))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the API server to take in the test setup (last answer: %s): %w", last, ctx.Err())
		case <-tick.C:
		}
	}
}
