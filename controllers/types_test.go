package controllers_test

import "github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"

type hypervisorProvider = hypervisor.Provider
