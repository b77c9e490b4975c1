package e2e_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// newNamespace creates a namespace for t, with the admin client, and
// returns its name. Namespaces are not deleted: nothing runs the namespace
// controller, and the control plane is thrown away after the run.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: sanitize(t.Name()) + "-"}}
	ns, err := suite.admin.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	require.NoError(t, err)
	return ns.Name
}

// sanitize turns a test name into a prefix a namespace name may start
// with.
func sanitize(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
		if b.Len() == 40 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}
