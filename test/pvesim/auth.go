package pvesim

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/pvesim/schema"
)

// authInfo is the authenticated caller.
type authInfo struct {
	user  string // "user@realm" or, for tokens, "user@realm!tokenid"
	token string // token ID when authenticated by token
	// privs nil means all privileges.
	privs map[string]bool
}

func (a *authInfo) isRoot() bool { return a.user == "root@pam" }

var tokenIDRe = regexp.MustCompile(`^[^\s:!@]+@[A-Za-z][A-Za-z0-9.\-_]+![A-Za-z][A-Za-z0-9.\-_]+$`)

func validateTokenID(id string) error {
	if !tokenIDRe.MatchString(id) {
		return fmt.Errorf("pvesim: token ID %q is not USER@REALM!TOKENID", id)
	}
	return nil
}

// authenticate mirrors pve-manager's PVE::HTTPServer::auth_handler: a ticket
// cookie (CSRF token required on writes), else an API token, else 401.
func (s *Simulator) authenticate(r *http.Request, rel string) (*authInfo, *apiError) {
	if rel == "/access/ticket" && (r.Method == http.MethodPost || r.Method == http.MethodGet) {
		return &authInfo{}, nil
	}
	unauthorized := func(msg string) *apiError {
		return &apiError{Code: http.StatusUnauthorized, Message: msg + "\n", NoBody: true}
	}
	ticket := extractAuthValue(r.Header.Get("Cookie"), "PVEAuthCookie")
	if ticket == "" {
		ticket = extractAuthValue(r.Header.Get("Authorization"), "PVEAuthCookie")
	}
	if ticket != "" {
		s.mu.Lock()
		user, ok := s.tickets[ticket]
		s.mu.Unlock()
		if !ok {
			return nil, unauthorized("Authentication failed!")
		}
		isUpload := r.Method == http.MethodPost && strings.HasSuffix(rel, "/upload") && strings.Contains(rel, "/storage/")
		if r.Method != http.MethodGet && !isUpload {
			tok := r.Header.Get("CSRFPreventionToken")
			s.mu.Lock()
			csrfUser, ok := s.csrf[tok]
			s.mu.Unlock()
			if !ok || csrfUser != user {
				return nil, unauthorized("Permission denied - invalid csrf token")
			}
		}
		return &authInfo{user: user}, nil
	}
	if api := extractAuthValue(r.Header.Get("Authorization"), "PVEAPIToken"); api != "" {
		id, secret, ok := strings.Cut(api, "=")
		if ok {
			for _, t := range s.cfg.Tokens {
				if t.ID == id && subtle.ConstantTimeCompare([]byte(t.Secret), []byte(secret)) == 1 {
					a := &authInfo{user: id, token: id}
					if t.Privileges != nil {
						a.privs = map[string]bool{}
						for _, p := range t.Privileges {
							a.privs[p] = true
						}
					}
					return a, nil
				}
			}
		}
		return nil, unauthorized("Authentication failed!")
	}
	return nil, unauthorized("No ticket")
}

// extractAuthValue is PVE::APIServer::Formatter::extract_auth_value.
func extractAuthValue(header, key string) string {
	if header == "" {
		return ""
	}
	re := regexp.MustCompile(`(?:^|\s)` + regexp.QuoteMeta(key) + `(?:=| )([^;]*)`)
	m := re.FindStringSubmatch(header)
	if m == nil {
		return ""
	}
	v, err := url.PathUnescape(m[1])
	if err != nil {
		return m[1]
	}
	return v
}

// has reports whether the caller holds priv (on any path: the simulator's
// privilege model is one flat set per token).
func (a *authInfo) has(priv string) bool {
	if a.isRoot() || a.privs == nil {
		return true
	}
	return a.privs[priv]
}

// checkPermissions evaluates a schema permission description like PVE's
// check_api2_permissions/exec_api2_perm_check.
func (s *Simulator) checkPermissions(perm *schema.Permissions, a *authInfo, p params) *apiError {
	if a.isRoot() || perm == nil {
		return nil
	}
	if perm.User == "all" || perm.User == "world" {
		return nil
	}
	if len(perm.Check) == 0 {
		return permErr("")
	}
	if ok, err := evalCheck(perm.Check, a, p, false); !ok {
		if err == nil {
			err = permErr("")
		}
		return err
	}
	return nil
}

func evalCheck(check []any, a *authInfo, p params, noerr bool) (bool, *apiError) {
	if len(check) == 0 {
		return false, permErr("")
	}
	test, _ := check[0].(string)
	switch test {
	case "and":
		for _, sub := range check[1:] {
			subList, _ := sub.([]any)
			if ok, err := evalCheck(subList, a, p, noerr); !ok {
				return false, err
			}
		}
		return true, nil
	case "or":
		for _, sub := range check[1:] {
			subList, _ := sub.([]any)
			if ok, _ := evalCheck(subList, a, p, true); ok {
				return true, nil
			}
		}
		return false, permErr("")
	case "perm":
		if len(check) < 3 {
			return false, permErr("")
		}
		tmpl, _ := check[1].(string)
		rawPrivs, _ := check[2].([]any)
		opts := map[string]any{}
		for i := 3; i+1 < len(check); i += 2 {
			if k, ok := check[i].(string); ok {
				opts[k] = check[i+1]
			}
		}
		if rp, ok := opts["require_param"].(string); ok {
			if _, present := p[rp]; !present {
				return false, permErr("")
			}
		}
		path := tmpl
		for k, v := range p {
			path = strings.ReplaceAll(path, "{"+k+"}", v.s)
		}
		privs := make([]string, 0, len(rawPrivs))
		for _, rp := range rawPrivs {
			if s, ok := rp.(string); ok {
				privs = append(privs, s)
			}
		}
		if opts["any"] != nil {
			for _, pr := range privs {
				if a.has(pr) {
					return true, nil
				}
			}
			return false, permErr(path + ", " + strings.Join(privs, "|"))
		}
		for _, pr := range privs {
			if !a.has(pr) {
				return false, permErr(path + ", " + pr)
			}
		}
		return true, nil
	default:
		// userid-param, perm-modify, ...: not used by the simulated endpoints.
		return a.privs == nil, permErr("")
	}
}

// proxyCheck mirrors pveproxy forwarding a request to the node named in the
// URI: unknown nodes fail the hostname lookup, offline nodes do not answer.
func (s *Simulator) proxyCheck(node string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.node(node)
	if n == nil {
		return errf("hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known", node, node)
	}
	if !n.online {
		return &apiError{Code: 595, Message: "No route to host\n"}
	}
	return nil
}

// postTicket is POST /access/ticket: password login (or ticket renewal with
// the old ticket as password).
func (s *Simulator) postTicket(rq *request) (any, *apiError) {
	user := rq.p.get("username")
	if realm := rq.p.get("realm"); realm != "" && !strings.Contains(user, "@") {
		user += "@" + realm
	}
	password := rq.p.get("password")
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := false
	if want, found := s.cfg.Users[user]; found && subtle.ConstantTimeCompare([]byte(want), []byte(password)) == 1 {
		ok = true
	} else if tu, found := s.tickets[password]; found && tu == user {
		ok = true
	}
	if !ok {
		return nil, &apiError{Code: http.StatusUnauthorized, Message: "authentication failure\n"}
	}
	now := time.Now().Unix()
	ticket := fmt.Sprintf("PVE:%s:%08X::%s", user, now, randomB64(256))
	csrf := fmt.Sprintf("%08X:%s", now, randomB64(32))
	s.tickets[ticket] = user
	s.csrf[csrf] = user
	return map[string]any{
		"username":            user,
		"ticket":              ticket,
		"CSRFPreventionToken": csrf,
		"clustername":         s.cluster,
		"cap":                 capabilities(),
	}, nil
}

func randomB64(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawStdEncoding.EncodeToString(b)
}

var allPrivileges = []string{
	"Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.AllocateTemplate", "Datastore.Audit",
	"Pool.Allocate", "Pool.Audit", "SDN.Use", "Sys.Audit", "Sys.Modify",
	"VM.Allocate", "VM.Audit", "VM.Clone", "VM.Config.CDROM", "VM.Config.CPU", "VM.Config.Cloudinit",
	"VM.Config.Disk", "VM.Config.HWType", "VM.Config.Memory", "VM.Config.Network", "VM.Config.Options",
	"VM.GuestAgent.Audit", "VM.GuestAgent.Unrestricted", "VM.Migrate", "VM.PowerMgmt", "VM.Snapshot", "VM.Snapshot.Rollback",
	"Mapping.Audit", "Mapping.Modify", "Mapping.Use",
}

func capabilities() map[string]map[string]int {
	all := map[string]int{}
	for _, p := range allPrivileges {
		all[p] = 1
	}
	return map[string]map[string]int{"vms": all, "storage": all, "nodes": all, "access": all, "dc": all}
}

// getPermissions is GET /access/permissions: the caller's privileges per path.
func (s *Simulator) getPermissions(rq *request) (any, *apiError) {
	privs := map[string]int{}
	for _, p := range allPrivileges {
		if rq.auth.has(p) {
			privs[p] = 1
		}
	}
	path := rq.p.get("path")
	if path == "" {
		path = "/"
	}
	return map[string]any{path: privs}, nil
}
