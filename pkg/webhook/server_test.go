package webhook_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/webhook"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func TestServeRecordsAndStopsWithItsContext(t *testing.T) {
	g := NewWithT(t)
	h := startReceiver(t, webhook.Config{}, false)
	pool := h.createPool(t, "linux", linuxPool)
	receiver := webhook.NewReceiver(env.Client, demand.NewStore(env.Client), h.config(webhook.Config{}), nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- receiver.Serve(ctx, l) }()

	url := "http://" + l.Addr().String() + webhook.Path
	status, err := fakegithub.PostWebhook(ctx, h.client, url, secret, "workflow_job", fakegithub.NewDeliveryID(), job{id: 3, action: "queued"}.payload())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusAccepted))
	g.Eventually(func() int { return h.snapshot(g, pool).Queued }).WithTimeout(10 * time.Second).Should(Equal(1))

	cancel()
	g.Eventually(served).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	_, err = http.Get(url)
	g.Expect(err).To(HaveOccurred(), "the listener is closed")
}
