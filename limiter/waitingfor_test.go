package limiter_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/harness"
	"github.com/k8sratelimit/k8sratelimit/limiter"
)

// A refusal names what the request would have waited for, in its field
// and in its message.
func TestRefusalNamesWhatTheRequestWaitsFor(t *testing.T) {
	tests := []struct {
		name   string
		seats  int                               // fixed seats; 0: none
		before func(*testing.T, *limiter.Budget) // fills what the request then waits for
		want   rlerrors.WaitingFor
		phrase string
	}{
		{"a full window", 0, func(t *testing.T, b *limiter.Budget) {
			for range 2 {
				require.NoError(t, b.Wait(context.Background()))
			}
		}, rlerrors.WaitingForRateSlot, "(waiting for a rate slot)"},
		{"a cooldown", 0, func(t *testing.T, b *limiter.Budget) {
			_, err := b.SetCooldown(context.Background(), 5*time.Second)
			require.NoError(t, err)
		}, rlerrors.WaitingForCooldown, "(cooling down after the server's 429)"},
		{"every seat held", 1, nil, rlerrors.WaitingForSeat, "(waiting for a seat)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := limiter.Options{Concurrency: limiter.Concurrency{Fixed: tt.seats}}
			b, _ := setup(t, window(2, time.Minute), opts)
			srv := newServer()
			rt := b.Wrap(srv)
			if tt.before != nil {
				tt.before(t, b)
			}
			var holder *pending
			var hold <-chan error
			if tt.seats > 0 {
				hold = send(context.Background(), rt, "/first")
				holder = srv.next(t)
			}

			err := harness.Result(t, send(k8sratelimit.WithMaxWait(context.Background(), 0), rt, "/refused"))
			var rle *rlerrors.RateLimitExceededError
			require.ErrorAs(t, err, &rle)
			assert.Equal(t, tt.want, rle.WaitingFor)
			assert.Contains(t, rle.Error(), tt.phrase)

			if holder != nil {
				srv.respond(holder, http.StatusOK, nil)
				require.NoError(t, harness.Result(t, hold))
			}
		})
	}
}
