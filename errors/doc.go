// Package errors defines the errors returned by k8sratelimit.
//
// It follows k8s.io/apimachinery/pkg/api/errors and shares its name with the
// standard library package, so import it under another name:
//
//	import rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
//
// Every error type here survives wrapping: client-go wraps the errors its
// transport returns in *url.Error, and errors.As still finds them.
package errors
