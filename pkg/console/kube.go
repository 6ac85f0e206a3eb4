package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// kube hands out clients that impersonate a person, so every request the console makes for them
// is authorized by Kubernetes against that person's RBAC, never the console's.
type kube struct {
	config *rest.Config
	scheme *runtime.Scheme
	mapper meta.RESTMapper
}

func newKube(cfg *rest.Config, scheme *runtime.Scheme) (*kube, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &kube{config: cfg, scheme: scheme, mapper: mapper}, nil
}

// clientFor returns a client acting as p.
func (k *kube) clientFor(p Principal) (client.Client, error) {
	if p.User == "" {
		return nil, errors.New("no user to impersonate")
	}
	cfg := rest.CopyConfig(k.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: p.User, Groups: p.Groups}
	return client.New(cfg, client.Options{Scheme: k.scheme, Mapper: k.mapper})
}

// listVisible lists objects as a person sees them: in namespace when given (a refusal is the
// person's 403), else cluster-wide when they may, else namespace by namespace over the namespaces
// the inventory knows, skipping those they may not read.
func listVisible[L client.ObjectList](ctx context.Context, c client.Client, namespaces []string, namespace string, newList func() L, each func(L)) error {
	if namespace != "" {
		l := newList()
		if err := c.List(ctx, l, client.InNamespace(namespace)); err != nil {
			return err
		}
		each(l)
		return nil
	}
	l := newList()
	err := c.List(ctx, l)
	if err == nil {
		each(l)
		return nil
	}
	if !apierrors.IsForbidden(err) {
		return err
	}
	for _, ns := range namespaces {
		l := newList()
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			if apierrors.IsForbidden(err) {
				continue
			}
			return err
		}
		each(l)
	}
	return nil
}

// writeKubeError answers with the Kubernetes API's refusal, translated for people.
func writeKubeError(w http.ResponseWriter, r *http.Request, err error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		writeProblem(w, r, http.StatusBadGateway, "Kubernetes API unavailable", err.Error(), nil)
		return
	}
	st := status.Status()
	switch {
	case apierrors.IsForbidden(err):
		writeProblem(w, r, http.StatusForbidden, "Forbidden by Kubernetes RBAC", st.Message, nil)
	case apierrors.IsNotFound(err):
		writeProblem(w, r, http.StatusNotFound, "Not found", st.Message, nil)
	case apierrors.IsAlreadyExists(err):
		writeProblem(w, r, http.StatusConflict, "Already exists", st.Message, nil)
	case apierrors.IsConflict(err):
		writeProblem(w, r, http.StatusConflict, "Conflict", st.Message, nil)
	case apierrors.IsInvalid(err):
		var fields []FieldError
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				fields = append(fields, FieldError{Field: c.Field, Message: c.Message})
			}
		}
		writeProblem(w, r, http.StatusUnprocessableEntity, "Invalid request", st.Message, fields)
	default:
		writeProblem(w, r, http.StatusBadGateway, "Kubernetes API error", fmt.Sprintf("%d: %s", st.Code, st.Message), nil)
	}
}
