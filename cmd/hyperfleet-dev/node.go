package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/hyperfleet-io/hyperfleet/internal/node"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

// nodeCmd starts a real single-node Kubernetes (make node) and keeps it until Ctrl-C.
func nodeCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	dir := fs.String("dir", filepath.Join(defaultStateDir(), "..", "node"), "directory of the node's state (removed when it stops)")
	var imports multiFlag
	fs.Var(&imports, "import", "image archive to import into the node (repeatable; make images writes them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tools, err := testenv.FindTools()
	if err != nil {
		return err
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	cache, err := testenv.ToolsCacheDir()
	if err != nil {
		return err
	}
	n, err := node.Start(ctx, node.Options{Dir: *dir, K8sBin: tools.Assets, NodeBin: filepath.Join(cache, "node"), RepoRoot: root, Log: out})
	if err != nil {
		return err
	}
	defer n.Stop()
	for _, a := range imports {
		if err := n.ImportImage(ctx, a); err != nil {
			return err
		}
		fmt.Fprintf(out, "imported %s\n", a)
	}
	fmt.Fprintf(out, "node Ready; kubectl --kubeconfig %s get nodes   (Ctrl-C stops the node and removes %s)\n", n.AdminKubeconfig, *dir)
	<-ctx.Done()
	fmt.Fprintln(out, "stopping the node")
	return nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
