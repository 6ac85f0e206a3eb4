package buildkite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	bk "github.com/buildkite/go-buildkite/v4"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// TokenDescriptionPrefix starts the description of every cluster agent token HyperFleet
// creates: "HyperFleet runner <machine> <pool mark>", so an operator sees in Buildkite which VM
// holds which token, and HyperFleet finds its leftovers. The pool mark
// (platform.PoolRunnerLabel) keeps pools apart: Machine names are unique in a namespace only,
// and a cluster's tokens are shared by every pool that serves it.
const TokenDescriptionPrefix = "HyperFleet runner "

func description(name, mark string) string {
	if mark == "" {
		return TokenDescriptionPrefix + name
	}
	return TokenDescriptionPrefix + name + " " + mark
}

// AgentConfig is what a VM receives, once, from the bootstrap service: enough to run
// `buildkite-agent start --endpoint E --token T --tags K=V,... --name N --disconnect-after-job`.
type AgentConfig struct {
	Endpoint string   `json:"endpoint"`
	Token    string   `json:"token"`
	Tags     []string `json:"tags"`
	Name     string   `json:"name"`
	// CA is the PEM bundle the agent trusts for Endpoint, when the pool names one; the in-VM
	// agent points buildkite-agent's SSL_CERT_FILE at it.
	CA string `json:"ca,omitempty"`
}

// Registration is a VM's agent token: its ID, kept to delete it when the VM goes, and the
// config JSON (AgentConfig) handed to the VM; the token value is in the config only.
type Registration struct {
	TokenID string
	Config  []byte
}

// Register creates a cluster agent token for one VM (name is its Machine's name, unique and
// deterministic; mark its pool's mark) and returns the registration. A token left over from an
// earlier attempt for the same name and pool is ours and cannot be read back (Buildkite shows a
// value only once), so it is deleted first: a retry after a crash leaves no orphan. Callers must
// not register one name from two places at once.
func (c *Client) Register(ctx context.Context, name, mark string, tags Tags) (Registration, error) {
	if strings.TrimSpace(name) == "" || strings.ContainsAny(name+mark, " \t\n") {
		return Registration{}, fmt.Errorf("%w: agent name %q or pool mark %q is empty or has blanks", platform.ErrInvalid, name, mark)
	}
	if err := c.DeregisterByName(ctx, name, mark); err != nil {
		return Registration{}, err
	}
	tok, _, err := c.bk.ClusterTokens.Create(ctx, c.cfg.Organization, c.cfg.ClusterID, bk.ClusterTokenCreateUpdate{
		Description: description(name, mark),
	})
	if err != nil {
		return Registration{}, classify("create cluster agent token for "+name, err)
	}
	if tok.ID == "" || tok.Token == "" {
		return Registration{}, &platform.Error{Class: platform.ErrTransient, Op: "create cluster agent token for " + name,
			Err: errors.New("the response carries no token ID or value")}
	}
	cfg, err := json.Marshal(AgentConfig{Endpoint: c.cfg.AgentEndpoint, Token: tok.Token, Tags: tags.Strings(), Name: name, CA: string(c.cfg.AgentCAPEM)})
	if err != nil {
		return Registration{}, err
	}
	return Registration{TokenID: tok.ID, Config: cfg}, nil
}

// Deregister deletes a VM's agent token, so it can register no agent any more; a token
// already gone is not an error. An agent that registered with it finishes its one job.
func (c *Client) Deregister(ctx context.Context, tokenID string) error {
	if tokenID == "" {
		return nil
	}
	_, err := c.bk.ClusterTokens.Delete(ctx, c.cfg.Organization, c.cfg.ClusterID, tokenID)
	if err = classify("delete cluster agent token "+tokenID, err); errors.Is(err, platform.ErrNotFound) {
		return nil
	}
	return err
}

// DeregisterByName deletes every HyperFleet token of the named VM of the pool with mark, for
// a VM whose token ID was never recorded.
func (c *Client) DeregisterByName(ctx context.Context, name, mark string) error {
	toks, err := c.Registrations(ctx)
	if err != nil {
		return err
	}
	for _, t := range toks {
		if t.Name == name && t.Mark == mark {
			if err := c.Deregister(ctx, t.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// TokenInfo is one of HyperFleet's cluster agent tokens, without its value.
type TokenInfo struct {
	ID   string
	Name string // the Machine's name from the description
	Mark string // the pool's mark from the description, if any
}

// maxPages bounds every listing, so a huge organization costs a bounded number of requests.
const maxPages = 20

// Registrations lists the cluster's agent tokens HyperFleet created (by description), for
// garbage collection of tokens whose VM is gone.
func (c *Client) Registrations(ctx context.Context) ([]TokenInfo, error) {
	var out []TokenInfo
	opt := &bk.ClusterTokensListOptions{ListOptions: bk.ListOptions{PerPage: 100}}
	for range maxPages {
		page, resp, err := c.bk.ClusterTokens.List(ctx, c.cfg.Organization, c.cfg.ClusterID, opt)
		if err != nil {
			return nil, classify("list cluster agent tokens", err)
		}
		for _, t := range page {
			rest, ok := strings.CutPrefix(t.Description, TokenDescriptionPrefix)
			if !ok || rest == "" {
				continue
			}
			name, mark, _ := strings.Cut(rest, " ")
			out = append(out, TokenInfo{ID: t.ID, Name: name, Mark: mark})
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	return out, nil
}
