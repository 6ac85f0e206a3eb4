package vsphere

import (
	"context"
	"crypto/x509"
	"errors"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/session/keepalive"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// keepAliveIdle is how long a session may sit idle before the provider sends a request to keep
// it: vCenter ends idle sessions after 30 minutes by default.
const keepAliveIdle = 10 * time.Minute

// Provider is the vSphere hypervisor.Provider of one HypervisorCluster.
type Provider struct {
	cfg Config

	mu sync.Mutex
	// conn is the logged-in session with the inventory objects it resolved; nil until the first
	// call and after vCenter ended the session.
	conn *conn
}

var _ hypervisor.Provider = (*Provider)(nil)

// conn is one session and the inventory it found.
type conn struct {
	c       *vim25.Client
	session *session.Manager
	dc      *object.Datacenter
	cluster *object.ClusterComputeResource
	pool    *object.ResourcePool
	folder  *object.Folder
	// datastore is nil when full clones stay on the template's datastore.
	datastore *object.Datastore

	mu sync.Mutex
	// views are the session's container views of the datacenter's objects by kind (VMs, hosts,
	// datastores, switches and port groups), made on first use and kept: each listing is then
	// one RetrieveProperties call.
	views map[string]*view.ContainerView
	// hostName names the hosts by reference; a reference it does not know reads them again.
	hostName map[types.ManagedObjectReference]string
	// vmRef remembers the managed object of each VM found by its instance UUID: it does not
	// change while the VM exists, and a VM that is gone answers ManagedObjectNotFound.
	vmRef map[string]types.ManagedObjectReference
	// rest is the session's vAPI (REST) client for vSphere tags, logged in on first use.
	rest *rest.Client
}

// New returns a provider for cfg; it connects on its first call.
func New(cfg Config) (*Provider, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Provider{cfg: cfg}, nil
}

// Close logs the session out.
func (p *Provider) Close() {
	p.mu.Lock()
	c := p.conn
	p.conn = nil
	p.mu.Unlock()
	if c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
		defer cancel()
		if c.rest != nil {
			_ = c.rest.Logout(ctx)
		}
		_ = c.session.Logout(ctx)
	}
}

// Capabilities implements hypervisor.Provider.
func (p *Provider) Capabilities() hypervisor.Capabilities {
	return hypervisor.Capabilities{LinkedClones: true, AsyncTasks: true, ExtraDisks: true, NICs: true}
}

// connect returns the session, logging in and finding the inventory when there is none.
func (p *Provider) connect(ctx context.Context) (*conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		return p.conn, nil
	}
	u, err := p.cfg.sdkURL()
	if err != nil {
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, "connect", "%v", err)
	}
	sc := soap.NewClient(u, p.cfg.InsecureSkipVerify)
	if len(p.cfg.CABundle) > 0 {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(p.cfg.CABundle)
		sc.DefaultTransport().TLSClientConfig.RootCAs = pool
	}
	sc.Timeout = p.cfg.Timeout
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, classify("connect", err)
	}
	sm := session.NewManager(c)
	c.RoundTripper = keepalive.NewHandlerSOAP(sc, keepAliveIdle, func() error {
		kctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
		defer cancel()
		_, err := methods.GetCurrentTime(kctx, c)
		return err
	})
	if err := sm.Login(ctx, url.UserPassword(p.cfg.Username, p.cfg.Password)); err != nil {
		return nil, classify("login", err)
	}
	cn := &conn{c: c, session: sm}
	if err := p.findInventory(ctx, cn); err != nil {
		_ = sm.Logout(ctx)
		return nil, err
	}
	p.conn = cn
	return cn, nil
}

// findInventory resolves the datacenter, compute cluster, resource pool, folder and datastore the
// configuration names.
func (p *Provider) findInventory(ctx context.Context, cn *conn) error {
	f := find.NewFinder(cn.c, true)
	var err error
	if p.cfg.Datacenter == "" {
		cn.dc, err = f.DefaultDatacenter(ctx)
	} else {
		cn.dc, err = f.Datacenter(ctx, p.cfg.Datacenter)
	}
	if err != nil {
		return hypervisor.Errorf(hypervisor.ErrInvalid, "connect", "datacenter %q: %v", p.cfg.Datacenter, err)
	}
	f.SetDatacenter(cn.dc)
	if p.cfg.ComputeCluster == "" {
		cn.cluster, err = f.DefaultClusterComputeResource(ctx)
	} else {
		cn.cluster, err = f.ClusterComputeResource(ctx, p.cfg.ComputeCluster)
	}
	if err != nil {
		return hypervisor.Errorf(hypervisor.ErrInvalid, "connect", "compute cluster %q: %v", p.cfg.ComputeCluster, err)
	}
	if p.cfg.ResourcePool == "" {
		cn.pool, err = cn.cluster.ResourcePool(ctx)
	} else {
		cn.pool, err = f.ResourcePool(ctx, p.cfg.ResourcePool)
	}
	if err != nil {
		return hypervisor.Errorf(hypervisor.ErrInvalid, "connect", "resource pool %q: %v", p.cfg.ResourcePool, err)
	}
	if p.cfg.Folder == "" {
		folders, ferr := cn.dc.Folders(ctx)
		if ferr != nil {
			return classify("connect", ferr)
		}
		cn.folder = folders.VmFolder
	} else if cn.folder, err = f.Folder(ctx, p.cfg.Folder); err != nil {
		return hypervisor.Errorf(hypervisor.ErrInvalid, "connect", "folder %q: %v", p.cfg.Folder, err)
	}
	if p.cfg.Datastore != "" {
		if cn.datastore, err = f.Datastore(ctx, p.cfg.Datastore); err != nil {
			return hypervisor.Errorf(hypervisor.ErrInvalid, "connect", "datastore %q: %v", p.cfg.Datastore, err)
		}
	}
	return nil
}

// do runs f with the session; when vCenter ended the session, it logs in again and runs f once
// more.
func (p *Provider) do(ctx context.Context, op string, f func(context.Context, *conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	cn, err := p.connect(ctx)
	if err != nil {
		return err
	}
	err = f(ctx, cn)
	if isNotAuthenticated(err) {
		p.mu.Lock()
		if p.conn == cn {
			p.conn = nil
		}
		p.mu.Unlock()
		if cn, err = p.connect(ctx); err != nil {
			return err
		}
		err = f(ctx, cn)
	}
	if err != nil {
		var he *hypervisor.Error
		if errors.As(err, &he) {
			return err
		}
		return classify(op, err)
	}
	return nil
}

func isNotAuthenticated(err error) bool {
	switch faultOf(err).(type) {
	case types.NotAuthenticated, *types.NotAuthenticated:
		return true
	}
	return false
}

// faultOf is the vSphere fault an error carries, nil when none.
func faultOf(err error) any {
	if err == nil {
		return nil
	}
	var te task.Error
	switch {
	case errors.As(err, &te):
		return te.Fault()
	case soap.IsSoapFault(err):
		return soap.ToSoapFault(err).VimFault()
	case soap.IsVimFault(err):
		return soap.ToVimFault(err)
	}
	return nil
}

// classify maps a vSphere error to HyperFleet's classes.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	class := hypervisor.ErrTransient
	switch faultOf(err).(type) {
	case types.ManagedObjectNotFound, *types.ManagedObjectNotFound, types.NotFound, *types.NotFound:
		class = hypervisor.ErrNotFound
	case types.InvalidLogin, *types.InvalidLogin, types.NotAuthenticated, *types.NotAuthenticated:
		class = hypervisor.ErrUnauthorized
	case types.NoPermission, *types.NoPermission:
		class = hypervisor.ErrForbidden
	case types.DuplicateName, *types.DuplicateName, types.AlreadyExists, *types.AlreadyExists:
		class = hypervisor.ErrAlreadyExists
	case types.InvalidPowerState, *types.InvalidPowerState, types.TaskInProgress, *types.TaskInProgress,
		types.InvalidState, *types.InvalidState, types.ConcurrentAccess, *types.ConcurrentAccess,
		types.ResourceInUse, *types.ResourceInUse:
		class = hypervisor.ErrBusy
	case types.InvalidArgument, *types.InvalidArgument, types.InvalidRequest, *types.InvalidRequest,
		types.NotSupported, *types.NotSupported, types.InvalidDeviceSpec, *types.InvalidDeviceSpec:
		class = hypervisor.ErrInvalid
	default:
		if strings.Contains(err.Error(), "x509:") || strings.Contains(err.Error(), "certificate") {
			class = hypervisor.ErrUnauthorized
		}
	}
	return &hypervisor.Error{Class: class, Op: op, Err: err}
}

// refused is a classified error of HyperFleet's own making.
func refused(class error, op, format string, args ...any) error {
	return hypervisor.Errorf(class, op, format, args...)
}

// taskID is a started task's handle.
func taskID(t *object.Task) hypervisor.TaskID {
	return hypervisor.TaskID(t.Reference().Value)
}
