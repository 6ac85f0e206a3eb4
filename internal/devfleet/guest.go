package devfleet

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// guestURL is a loopback URL (scheme://127.0.0.1:PORT/...) as a QEMU guest reaches it: at the
// address the simulator forwards to guests, on the same port.
func guestURL(u string) string {
	return strings.Replace(u, "://127.0.0.1:", "://"+pvesim.GuestForwardIP+":", 1)
}

// forwardToGuests lets the fleet's QEMU guests reach the loopback services urls name (in either
// form), and nothing else.
func (f *Fleet) forwardToGuests(urls ...string) error {
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return err
		}
		port, err := strconv.Atoi(u.Port())
		if err != nil {
			return fmt.Errorf("forwarding %s to guests: no port", raw)
		}
		f.Simulator.ForwardToGuests(port, net.JoinHostPort("127.0.0.1", u.Port()))
	}
	return nil
}
