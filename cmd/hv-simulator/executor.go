package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
	"github.com/hyperfleet-io/hyperfleet/test/qemuguest"
)

// executorFlags registers the simulated Hyper-V host this endpoint stands for and returns its
// constructor: one host with CPUs, memory, a switch and a template disk, answering the Hyper-V
// provider's scripts; --boot-command runs for every VM that starts, with its seed's NoCloud files, or
// --boot=qemu boots each VM as a real generation 2 guest from --guest-image (test/qemuguest).
func executorFlags(fs *flag.FlagSet) func(*slog.Logger) (hvsim.Executor, error) {
	host := fs.String("host", "hv1", "name of the simulated Hyper-V host behind this endpoint")
	cpus := fs.Int("cpus", 16, "the host's logical processors")
	memoryMiB := fs.Int64("memory-mib", 64<<10, "the host's memory in MiB")
	vSwitch := fs.String("switch", hvsim.HyperVSwitch, "the host's virtual switch")
	templateDisk := fs.String("template-disk", hvsim.HyperVTemplateDisk, "a template VHDX on the host (\"\" for none)")
	quirks := fs.Bool("ps51-quirks", true, "answer with Windows PowerShell 5.1's unforced shapes (unwrapped one-element arrays, /Date(ms)/)")
	bootCommand := fs.String("boot-command", "", "run this with sh -c when a VM starts; the VM powers off when it exits (--boot=process)")
	boot := fs.String("boot", "process", "what a VM start runs: process (--boot-command, if given) or qemu (a real generation 2 guest from --guest-image)")
	guestImage := fs.String("guest-image", "", "template image (qcow2, or the .vhdx made from it) every QEMU guest boots from a differencing overlay (--boot=qemu)")
	guestDir := fs.String("guest-dir", "", "directory for QEMU guests' disks, seeds, sockets and console logs (default: temporary)")
	var forwards multiFlag
	fs.Var(&forwards, "guest-forward", "PORT=HOST:PORT: QEMU guests reach HOST:PORT at "+qemuguest.ForwardIP+":PORT (repeatable)")
	return func(log *slog.Logger) (hvsim.Executor, error) {
		cfg := hvsim.HyperVConfig{PS51Quirks: *quirks, Logger: log}
		switch *boot {
		case "process":
			if *bootCommand != "" {
				cfg.BootHook = commandHook(*bootCommand, log)
			}
		case "qemu":
			if *guestImage == "" {
				return nil, errors.New("--boot=qemu needs --guest-image (hack/template.sh builds one)")
			}
			g := &qemuguest.Config{Image: *guestImage, Dir: *guestDir}
			for _, f := range forwards {
				fwd, err := qemuguest.ParseForward(f)
				if err != nil {
					return nil, fmt.Errorf("--guest-forward %w", err)
				}
				g.Forwards = append(g.Forwards, fwd)
			}
			cfg.Guest = g
		default:
			return nil, fmt.Errorf("--boot %q: want process or qemu", *boot)
		}
		hv := hvsim.NewHyperV(cfg)
		if err := hv.GuestErr(); err != nil {
			return nil, err
		}
		hv.AddHost(*host, *cpus, *memoryMiB, *vSwitch)
		if *templateDisk != "" {
			if err := hv.AddTemplateDisk(*host, *templateDisk, 20); err != nil {
				return nil, err
			}
		}
		log.Info("simulated Hyper-V host", "host", *host, "switch", *vSwitch, "template", *templateDisk)
		return hv.Executor(*host), nil
	}
}

// commandHook runs cmd with sh -c for each booting VM, its NoCloud files in temp files named by
// HVSIM_* variables. The VM powers off when the process exits; the process group is killed when
// the VM is turned off.
func commandHook(cmd string, log *slog.Logger) hvsim.HyperVBootHook {
	return func(ctx context.Context, vm hvsim.HyperVBootVM) error {
		dir, err := os.MkdirTemp("", "hvsim-vm-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		env := os.Environ()
		for _, f := range []struct {
			env, file string
			data      []byte
		}{
			{"HVSIM_USER_DATA", "user-data", vm.UserData},
			{"HVSIM_META_DATA", "meta-data", vm.MetaData},
			{"HVSIM_NETWORK_CONFIG", "network-config", vm.NetworkConfig},
			{"HVSIM_VENDOR_DATA", "vendor-data", vm.VendorData},
		} {
			p := filepath.Join(dir, f.file)
			if err := os.WriteFile(p, f.data, 0o600); err != nil {
				return err
			}
			env = append(env, f.env+"="+p)
		}
		env = append(env, "HVSIM_VM_ID="+vm.ID, "HVSIM_HOST="+vm.Host, "HVSIM_VM_NAME="+vm.Name,
			"HVSIM_VM_IP="+vm.IP, "HVSIM_VM_MAC="+vm.MAC)
		c := exec.CommandContext(ctx, "sh", "-c", cmd)
		c.Env, c.Dir = env, dir
		c.Stdout, c.Stderr = os.Stderr, os.Stderr
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
		c.WaitDelay = 5 * time.Second
		log.Info("booting VM", "vm", vm.ID, "name", vm.Name)
		err = c.Run()
		log.Info("VM guest exited", "vm", vm.ID, "err", err)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("boot command: %w", err)
		}
		return nil
	}
}
