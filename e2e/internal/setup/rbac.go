package setup

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// userRules are what the ordinary test users may do: work with namespaces,
// config maps and pods, exec into pods, write events, hold leases (leader
// election), and read the health endpoints.
var userRules = []rbacv1.PolicyRule{
	{
		APIGroups: []string{""},
		Resources: []string{"namespaces", "configmaps", "pods", "serviceaccounts"},
		Verbs:     []string{"get", "list", "watch", "create", "update", "patch", "delete"},
	},
	{
		APIGroups: []string{""},
		Resources: []string{"pods/exec"},
		Verbs:     []string{"get", "create"},
	},
	{
		APIGroups: []string{"", "events.k8s.io"},
		Resources: []string{"events"},
		Verbs:     []string{"get", "list", "watch", "create", "update", "patch"},
	},
	{
		APIGroups: []string{"coordination.k8s.io"},
		Resources: []string{"leases"},
		Verbs:     []string{"get", "list", "watch", "create", "update", "patch"},
	},
	{
		NonResourceURLs: []string{"/version", "/healthz", "/readyz", "/livez"},
		Verbs:           []string{"get"},
	},
}

// GrantUsers binds a cluster role with userRules to group, using the
// admin clientset cs.
func GrantUsers(ctx context.Context, cs kubernetes.Interface, group string) error {
	name := "k8sratelimit-e2e-users"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: userRules}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating cluster role %s: %w", name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating cluster role binding %s: %w", name, err)
	}
	return nil
}
