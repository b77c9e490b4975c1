package e2e_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit/e2e/internal/controlplane"
	"github.com/k8sratelimit/k8sratelimit/e2e/internal/setup"
	"github.com/k8sratelimit/k8sratelimit/internal/childproc"
)

// The users of the suite. Every one is an ordinary user (not exempt from
// API Priority and Fairness) in userGroup; each throttled one has a
// priority level of its own.
const (
	userGroup = "k8sratelimit-e2e-users"

	userPlain     = "plain"          // served like any workload
	userUnlimited = "apf-unlimited"  // throttled, driven without a limiter
	userLimited   = "apf-limited"    // throttled, driven through the limiter
	userMaxWait   = "apf-maxwait"    // throttled, driven into a cooldown
	userSeats     = "apf-seats"      // throttled, for the concurrency limit's runs
	userSeatsDflt = "apf-seats-dflt" // throttled, for the default configuration's run
	userQueued    = "apf-queued"     // a level that queues instead of rejecting
	userWide      = "apf-wide"       // throttled, a level of about 20 seats
	userNeighbour = "apf-neighbour"  // throttled, ignores Retry-After, in one level with userBeside
	userBeside    = "apf-beside"     // throttled beside userNeighbour
	userClasses   = "apf-classes"    // throttled, a level of about 6 seats, for the traffic classes

	userSeatsRedis     = "apf-seats-redis"      // throttled, for the shared concurrency limit
	userSeatsRedisDflt = "apf-seats-redis-dflt" // throttled, for the shared default configuration
)

// throttledUsers are the users that get a rejecting priority level.
var throttledUsers = []string{userUnlimited, userLimited, userMaxWait, userSeats, userSeatsDflt, userSeatsRedis, userSeatsRedisDflt}

// wideShares are the nominal concurrency shares of userWide's level:
// about 20 seats.
const wideShares = 9

// classesShares are the nominal concurrency shares of userClasses's
// level: about 6 seats.
const classesShares = 3

// queuedLength is the queue of userQueued's level: room for every worker
// of the seats tests, so that it never rejects.
const queuedLength = 128

// startTimeout bounds starting the control plane and preparing it.
const startTimeout = 3 * time.Minute

// suite is the control plane every test runs against, and what was set up
// on it.
var suite struct {
	binDir    string
	cp        *controlplane.ControlPlane
	admin     kubernetes.Interface
	throttles map[string]*setup.Throttle
}

func TestMain(m *testing.M) {
	childproc.Main(childEnv, runChild) // a process of a shared-budget test
	os.Exit(run(m))
}

// run starts the control plane, runs the tests and stops the control plane
// by pid whatever happened, returning the exit code. Should the test
// binary die without running its defers (a test's panic, the test
// timeout), both processes are killed with it (see controlplane).
func run(m *testing.M) (code int) {
	binDir, err := controlplane.LocateBinaries(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	suite.binDir = binDir

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		BinDir:    binDir,
		Users:     append([]string{userPlain, userQueued, userWide, userNeighbour, userBeside, userClasses}, throttledUsers...),
		UserGroup: userGroup,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	suite.cp = cp
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the control plane:", err)
		}
		if code != 0 {
			fmt.Fprintln(os.Stderr, "e2e: control plane logs kept in", cp.Dir())
			return
		}
		cp.RemoveFiles()
	}()
	etcdPid, apiPid := cp.Pids()
	fmt.Printf("e2e: kube-apiserver at %s (pid %d), etcd pid %d, binaries from %s\n", cp.URL(), apiPid, etcdPid, binDir)

	if err := prepare(ctx, cp); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: preparing the control plane:", err)
		return 1
	}
	return m.Run()
}

// prepare grants the users their permissions and throttles the throttled
// ones, and waits until the API server applies both.
func prepare(ctx context.Context, cp *controlplane.ControlPlane) error {
	admin, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		return err
	}
	suite.admin = admin
	if err := setup.GrantUsers(ctx, admin, userGroup); err != nil {
		return err
	}
	suite.throttles = make(map[string]*setup.Throttle)
	for _, user := range throttledUsers {
		th, err := setup.ThrottleUser(ctx, admin, user)
		if err != nil {
			return err
		}
		if err := th.WaitClassified(ctx, cp.UserConfig(user)); err != nil {
			return fmt.Errorf("user %s: %w", user, err)
		}
		suite.throttles[user] = th
	}
	th, err := setup.QueueUser(ctx, admin, userQueued, queuedLength)
	if err != nil {
		return err
	}
	if err := th.WaitClassified(ctx, cp.UserConfig(userQueued)); err != nil {
		return fmt.Errorf("user %s: %w", userQueued, err)
	}
	suite.throttles[userQueued] = th
	if th, err = setup.ThrottleUserWide(ctx, admin, userWide, wideShares); err != nil {
		return err
	}
	if err := th.WaitClassified(ctx, cp.UserConfig(userWide)); err != nil {
		return fmt.Errorf("user %s: %w", userWide, err)
	}
	suite.throttles[userWide] = th
	if th, err = setup.ThrottleUserWide(ctx, admin, userClasses, classesShares); err != nil {
		return err
	}
	if err := th.WaitClassified(ctx, cp.UserConfig(userClasses)); err != nil {
		return fmt.Errorf("user %s: %w", userClasses, err)
	}
	suite.throttles[userClasses] = th
	if th, err = setup.ThrottleUsers(ctx, admin, userNeighbour, userBeside); err != nil {
		return err
	}
	for _, user := range []string{userNeighbour, userBeside} {
		if err := th.WaitClassified(ctx, cp.UserConfig(user)); err != nil {
			return fmt.Errorf("user %s: %w", user, err)
		}
		suite.throttles[user] = th
	}
	return setup.WaitAuthorized(ctx, cp.UserConfig(userPlain))
}

// userConfig returns a fresh client configuration for user with
// client-go's own limiter off, so that only what a test adds limits it.
func userConfig(user string) *rest.Config {
	rc := suite.cp.UserConfig(user)
	rc.QPS = -1
	return rc
}
