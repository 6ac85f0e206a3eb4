package controllers

import (
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

func klogRef(o client.Object) klog.ObjectRef { return klog.KObj(o) }

func controllerRemoveFinalizer(o client.Object, finalizer string) {
	controllerutil.RemoveFinalizer(o, finalizer)
}

// backoff is the delay after n consecutive failures: 5s doubling up to 5m.
func backoff(n int32) time.Duration {
	d := 5 * time.Second
	for i := int32(1); i < n && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}
