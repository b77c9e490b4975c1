package controlplane

import (
	"context"
	"fmt"
	"time"
)

// pollInterval is how often a starting process is checked for readiness.
const pollInterval = 100 * time.Millisecond

// waitUntil polls ready until it returns true, failing early when p exits
// or ctx ends.
func waitUntil(ctx context.Context, p *process, ready func() bool) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if ready() {
			return nil
		}
		if err := p.exitedEarly(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; the end of %s's log:\n%s", ctx.Err(), p.name, p.logTail(40))
		case <-tick.C:
		}
	}
}
