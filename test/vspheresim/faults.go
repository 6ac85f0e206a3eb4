package vspheresim

import (
	"context"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Fail makes the next count calls of method (a SOAP method, "CloneVM_Task") answer fault, as
// vCenter answers a refused call; count 0 fails every call until ClearFaults.
func (s *Simulator) Fail(method string, fault types.BaseMethodFault, count int) {
	s.model.Service.AddFaultRule(&simulator.FaultInjectionRule{MethodName: method, ObjectType: "*", ObjectName: "*",
		Probability: 1, FaultType: simulator.FaultTypeCustom, Fault: fault, MaxCount: count, Enabled: true})
}

// ClearFaults removes every fault Fail added.
func (s *Simulator) ClearFaults() { s.model.Service.ClearFaultRules() }

// EndSessions ends every session but the simulator's own, as vCenter does on an idle timeout or a
// restart: their next call answers NotAuthenticated.
func (s *Simulator) EndSessions() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = c.Logout(ctx) }()
	sm := session.NewManager(c.Client)
	own, err := sm.UserSession(ctx)
	if err != nil {
		return err
	}
	var m mo.SessionManager
	if err := c.RetrieveOne(ctx, *c.ServiceContent.SessionManager, []string{"sessionList"}, &m); err != nil {
		return err
	}
	var keys []string
	for _, us := range m.SessionList {
		if own == nil || us.Key != own.Key {
			keys = append(keys, us.Key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return sm.TerminateSession(ctx, keys)
}

// SetMaintenance puts host into vSphere's maintenance mode (on) or takes it out, through vCenter's
// API as an administrator would.
func (s *Simulator) SetMaintenance(host string, on bool) error {
	return s.asAdmin(func(ctx context.Context, c *govmomi.Client, f *find.Finder, dc *object.Datacenter) error {
		h, err := f.HostSystem(ctx, host)
		if err != nil {
			return err
		}
		var t *object.Task
		if on {
			t, err = h.EnterMaintenanceMode(ctx, 0, false, nil)
		} else {
			t, err = h.ExitMaintenanceMode(ctx, 0)
		}
		if err != nil {
			return err
		}
		return t.Wait(ctx)
	})
}
