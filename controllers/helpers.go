package controllers

import (
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

func klogRef(o client.Object) klog.ObjectRef { return klog.KObj(o) }

func controllerRemoveFinalizer(o client.Object, finalizer string) {
	controllerutil.RemoveFinalizer(o, finalizer)
}
