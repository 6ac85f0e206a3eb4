package github

import "github.com/hyperfleet-io/hyperfleet/pkg/platform"

// Driver is GitHub's registration with pkg/platform: PoolClients built from the process's
// inputs, and the workflow_job parser of /webhooks/github.
func Driver() platform.Driver {
	return platform.Driver{
		Kind: platform.KindGitHub,
		NewSource: func(in platform.Inputs) (platform.Source, error) {
			return &PoolClients{Reader: in.Reader, Transport: in.Transport, HTTPTimeout: in.HTTPTimeout}, nil
		},
		Webhooks: webhookParser{},
		NewPollers: func(in platform.Inputs, feed platform.DemandFeed) (platform.Pollers, error) {
			return &PollSet{Reader: in.Reader, Feed: feed,
				Clients: &PoolClients{Reader: in.Reader, Transport: in.Transport, HTTPTimeout: in.HTTPTimeout}}, nil
		},
	}
}
