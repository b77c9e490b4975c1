package setup

import (
	"context"
	"fmt"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// matchingPrecedence places the test flow schemas before every default one
// that could match an ordinary user.
const matchingPrecedence = 500

// Throttle is an API Priority and Fairness priority level of the smallest
// share that rejects instead of queueing, and the flow schema that puts one
// user's requests in it.
type Throttle struct {
	User          string
	PriorityLevel *flowcontrolv1.PriorityLevelConfiguration
	FlowSchema    *flowcontrolv1.FlowSchema
}

// ThrottleUser creates a Throttle for user with the admin clientset cs.
// Each user gets its own priority level, so that what one test does to it
// (APF raises its Retry-After while it keeps rejecting) does not carry
// over to another.
func ThrottleUser(ctx context.Context, cs kubernetes.Interface, user string) (*Throttle, error) {
	return throttle(ctx, cs, user, 1, flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject})
}

// ThrottleUsers is ThrottleUser for several users sharing one priority
// level, named after the first, each a flow of its own.
func ThrottleUsers(ctx context.Context, cs kubernetes.Interface, users ...string) (*Throttle, error) {
	return throttle(ctx, cs, users[0], 1, flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}, users[1:]...)
}

// ThrottleUserWide is ThrottleUser with a level of shares nominal
// concurrency shares instead of one: some 2.3 seats per share with the
// default levels and the API server's 600 seats.
func ThrottleUserWide(ctx context.Context, cs kubernetes.Interface, user string, shares int32) (*Throttle, error) {
	return throttle(ctx, cs, user, shares, flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject})
}

// QueueUser is ThrottleUser with a priority level that queues the
// requests past its seats instead of rejecting them: one flow fits in a
// queue of queueLength requests; only beyond that are requests rejected.
func QueueUser(ctx context.Context, cs kubernetes.Interface, user string, queueLength int32) (*Throttle, error) {
	return throttle(ctx, cs, user, 1, flowcontrolv1.LimitResponse{
		Type: flowcontrolv1.LimitResponseTypeQueue,
		Queuing: &flowcontrolv1.QueuingConfiguration{
			Queues:           1,
			HandSize:         1,
			QueueLengthLimit: queueLength,
		},
	})
}

// throttle creates the priority level of user, of shares nominal
// concurrency shares, answering as lr says past its seats, and the flow
// schema that puts the user's requests in it.
func throttle(ctx context.Context, cs kubernetes.Interface, user string, shares int32, lr flowcontrolv1.LimitResponse, others ...string) (*Throttle, error) {
	name := "k8sratelimit-e2e-" + user
	pl := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To(shares),
				LendablePercent:          ptr.To[int32](0),
				// Unset would let it borrow without limit from other levels.
				BorrowingLimitPercent: ptr.To[int32](0),
				LimitResponse:         lr,
			},
		},
	}
	pl, err := cs.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, pl, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating priority level %s: %w", name, err)
	}
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: pl.Name},
			MatchingPrecedence:         matchingPrecedence,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: userSubjects(append([]string{user}, others...)),
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs:        []string{flowcontrolv1.VerbAll},
					APIGroups:    []string{flowcontrolv1.APIGroupAll},
					Resources:    []string{flowcontrolv1.ResourceAll},
					Namespaces:   []string{flowcontrolv1.NamespaceEvery},
					ClusterScope: true,
				}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{
					Verbs:           []string{flowcontrolv1.VerbAll},
					NonResourceURLs: []string{flowcontrolv1.NonResourceAll},
				}},
			}},
		},
	}
	fs, err = cs.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating flow schema %s: %w", name, err)
	}
	return &Throttle{User: user, PriorityLevel: pl, FlowSchema: fs}, nil
}

// userSubjects returns the flow schema subjects of users.
func userSubjects(users []string) []flowcontrolv1.Subject {
	subjects := make([]flowcontrolv1.Subject, len(users))
	for i, u := range users {
		subjects[i] = flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: u}}
	}
	return subjects
}
