package spire

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Errors from the SPIRE server, classified so callers can tell waiting from fixing.
var (
	// ErrUnavailable: the server did not answer in time or is overloaded; retry later.
	ErrUnavailable = errors.New("SPIRE server unavailable")
	// ErrPermissionDenied: the caller is not a SPIRE admin (over TCP its SVID must be listed in
	// the server's admin_ids or carry an admin entry).
	ErrPermissionDenied = errors.New("SPIRE server refused access")
	// ErrRejected: the server refused the request itself, e.g. an invalid selector.
	ErrRejected = errors.New("SPIRE server rejected the request")
	// ErrTrustDomainMismatch: the BootstrapConfig asks for a trust domain the server does not serve.
	ErrTrustDomainMismatch = errors.New("trust domain not served by this SPIRE server")
)

// classify wraps a gRPC error from the SPIRE server in one of the classes above.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	return classifyCode(op, st.Code(), st.Message(), err)
}

func classifyCode(op string, code codes.Code, msg string, err error) error {
	var class error
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Canceled:
		class = ErrUnavailable
	case codes.PermissionDenied, codes.Unauthenticated:
		class = ErrPermissionDenied
	case codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists, codes.NotFound, codes.OutOfRange:
		class = ErrRejected
	default:
		if err == nil {
			return fmt.Errorf("%s: %s: %s", op, code, msg)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%w: %s: %s: %s", class, op, code, msg)
}
