// Command pve-simulator runs HyperFleet's stateful Proxmox VE API simulator
// (test/pvesim) as a process, for local fleets and end-to-end tests.
//
//	pve-simulator --listen 127.0.0.1:8006 --ca-out /tmp/pvesim-ca.pem \
//	    --boot-command 'hyperfleet-agent --user-data "$PVESIM_USER_DATA"'
//
// With --boot=qemu a VM start boots a real guest under QEMU from the template image hack/template.sh
// builds; each --guest-forward PORT=HOST:PORT lets guests reach HOST:PORT at 10.0.2.100:PORT:
//
//	pve-simulator --boot=qemu --guest-image ~/.cache/hyperfleet/guest/hyperfleet-runner-debian12.qcow2 \
//	    --guest-forward 8443=127.0.0.1:8443
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
	"github.com/hyperfleet-io/hyperfleet/test/qemuguest"
)

// defaultToken is used when no --token is given, and printed at start.
const defaultToken = "root@pam!pvesim=d2a7c1e4-5b3f-4e8a-9c6d-1f0b2e3a4c5d"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "pve-simulator:", err)
		os.Exit(1)
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// run parses args, serves until ctx ends, then shuts down gracefully.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pve-simulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var tokens, users multiFlag
	listen := fs.String("listen", "127.0.0.1:8006", "address to serve HTTPS on")
	fs.Var(&tokens, "token", "API token USER@REALM!TOKENID=SECRET (repeatable; default: a printed root token)")
	fs.Var(&users, "user", "ticket login USER@REALM=PASSWORD (repeatable)")
	certFile := fs.String("tls-cert", "", "TLS certificate PEM (default: self-signed)")
	keyFile := fs.String("tls-key", "", "TLS key PEM")
	caOut := fs.String("ca-out", "", "write the CA certificate PEM clients should trust to this file")
	inventory := fs.String("inventory", "", "inventory YAML or JSON (default: built-in 3-node cluster)")
	taskDuration := fs.Duration("task-duration", 200*time.Millisecond, "how long clone/start/stop/delete tasks run")
	bootDelay := fs.Duration("boot-delay", 2*time.Second, "time from VM start until the guest agent reports addresses")
	bootCommand := fs.String("boot-command", "", "run this with sh -c when a VM starts; the VM powers off when it exits (--boot=process)")
	boot := fs.String("boot", "process", "what a VM start runs: process (--boot-command, if given) or qemu (a real guest from --guest-image)")
	guestImage := fs.String("guest-image", "", "qcow2 template image every QEMU guest boots as a linked clone (--boot=qemu)")
	guestDir := fs.String("guest-dir", "", "directory for QEMU guests' disks, seeds, sockets and console logs (default: temporary)")
	var forwards multiFlag
	fs.Var(&forwards, "guest-forward", "PORT=HOST:PORT: QEMU guests reach HOST:PORT at "+pvesim.GuestForwardIP+":PORT (repeatable)")
	logLevel := fs.String("log-level", envOr("LOG_LEVEL", "INFO"), "DEBUG, INFO, WARN or ERROR")
	seed := fs.Int64("seed", 1, "seed for fault injection and generated MACs")
	if err := fs.Parse(args); err != nil {
		return err
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	cfg := pvesim.Config{TaskDuration: *taskDuration, BootDelay: *bootDelay, Seed: *seed, Logger: logger,
		Users: map[string]string{}}
	if len(tokens) == 0 {
		tokens = multiFlag{defaultToken}
	}
	for _, t := range tokens {
		id, secret, ok := strings.Cut(t, "=")
		if !ok || secret == "" {
			return fmt.Errorf("--token %q: want USER@REALM!TOKENID=SECRET", t)
		}
		cfg.Tokens = append(cfg.Tokens, pvesim.Token{ID: id, Secret: secret})
	}
	for _, u := range users {
		name, pw, ok := strings.Cut(u, "=")
		if !ok || !strings.Contains(name, "@") {
			return fmt.Errorf("--user %q: want USER@REALM=PASSWORD", u)
		}
		cfg.Users[name] = pw
	}
	if *inventory != "" {
		inv, err := pvesim.LoadInventory(*inventory)
		if err != nil {
			return err
		}
		cfg.Inventory = inv
	}
	if (*certFile == "") != (*keyFile == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return fmt.Errorf("load TLS key pair: %w", err)
		}
		cfg.TLSCertificate = &cert
	}
	var sim *pvesim.Simulator
	switch *boot {
	case "process":
		if *bootCommand != "" {
			cfg.BootHook = commandHook(*bootCommand, func() string { return sim.URL() }, logger)
		}
	case "qemu":
		if *guestImage == "" {
			return errors.New("--boot=qemu needs --guest-image (hack/template.sh builds one)")
		}
		g := &pvesim.QEMUGuest{Image: *guestImage, Dir: *guestDir}
		for _, f := range forwards {
			fwd, err := qemuguest.ParseForward(f)
			if err != nil {
				return fmt.Errorf("--guest-forward %w", err)
			}
			g.Forwards = append(g.Forwards, fwd)
		}
		cfg.Guest = g
	default:
		return fmt.Errorf("--boot %q: want process or qemu", *boot)
	}
	sim, err := pvesim.New(cfg)
	if err != nil {
		return err
	}
	if err := sim.Start(*listen); err != nil {
		return err
	}
	if *caOut != "" {
		if err := os.WriteFile(*caOut, sim.CACertPEM(), 0o644); err != nil {
			_ = sim.Close()
			return fmt.Errorf("--ca-out: %w", err)
		}
	}
	fmt.Fprintf(stdout, "PVE simulator listening on %s\n", sim.URL())
	fmt.Fprintf(stdout, "admin endpoint: %s\n", sim.AdminURL())
	for _, t := range cfg.Tokens {
		fmt.Fprintf(stdout, "API token: PVEAPIToken=%s=%s\n", t.ID, t.Secret)
	}
	if *caOut != "" {
		fmt.Fprintf(stdout, "CA certificate: %s\n", *caOut)
	}
	logger.Info("started", "url", sim.URL(), "vms", len(sim.VMs()))
	<-ctx.Done()
	logger.Info("shutting down")
	return sim.Close()
}

// commandHook runs cmd with sh -c for each booting VM, with its cloud-init
// data in temp files named by PVESIM_* variables. The VM powers off when the
// process exits; the process group is killed when the VM is stopped.
func commandHook(cmd string, url func() string, log *slog.Logger) pvesim.BootHook {
	return func(ctx context.Context, vm pvesim.BootVM) error {
		dir, err := os.MkdirTemp("", fmt.Sprintf("pvesim-vm%d-", vm.VMID))
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		write := func(name string, data []byte) (string, error) {
			p := filepath.Join(dir, name)
			return p, os.WriteFile(p, data, 0o600)
		}
		env := os.Environ()
		for _, f := range []struct {
			env, file string
			data      []byte
		}{
			{"PVESIM_USER_DATA", "user-data", vm.UserData},
			{"PVESIM_META_DATA", "meta-data", vm.MetaData},
			{"PVESIM_NETWORK_CONFIG", "network-config", vm.NetworkConfig},
			{"PVESIM_VENDOR_DATA", "vendor-data", vm.VendorData},
		} {
			p, err := write(f.file, f.data)
			if err != nil {
				return err
			}
			env = append(env, f.env+"="+p)
		}
		env = append(env,
			"PVESIM_VMID="+strconv.Itoa(vm.VMID), "PVESIM_NODE="+vm.Node, "PVESIM_VM_NAME="+vm.Name,
			"PVESIM_VM_IP="+vm.IP, "PVESIM_VM_MAC="+vm.MAC, "PVESIM_TAGS="+strings.Join(vm.Tags, ";"),
			"PVESIM_URL="+url())
		c := exec.CommandContext(ctx, "sh", "-c", cmd)
		c.Env, c.Dir = env, dir
		c.Stdout, c.Stderr = os.Stderr, os.Stderr
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
		c.WaitDelay = 5 * time.Second
		log.Info("booting VM", "vmid", vm.VMID, "name", vm.Name)
		err = c.Run()
		log.Info("VM guest exited", "vmid", vm.VMID, "err", err)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
