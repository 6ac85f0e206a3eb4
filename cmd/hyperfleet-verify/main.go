// Command hyperfleet-verify checks a HyperFleet job record's signature with the installation's
// public keys alone, long after the job's VM, claim and Machine are gone. It reads a bare DSSE
// envelope or a job record export holding one in its "envelope" field:
//
//	kubectl -n hyperfleet-system get configmap hyperfleet-provenance-public-key \
//	  -o jsonpath='{.data.public\.pem}' > public.pem
//	hyperfleet-verify --key public.pem record.json
//
// It exits 0 when the record verifies, 1 when it does not (saying why), 2 on bad usage.
package main

import (
	"bytes"
	"crypto"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
)

const (
	exitVerified    = 0
	exitNotVerified = 1
	exitUsage       = 2
)

// maxInput bounds what is read from a file or stdin; a job record is a few kilobytes.
const maxInput = 16 << 20

const usage = `usage: hyperfleet-verify --key public.pem [--key previous.pem] [--quiet] record.json|envelope.json|-

Verifies a HyperFleet job record: a DSSE envelope carrying an in-toto Statement, given bare or as
the "envelope" field (an object, or base64 of one) of a job record export. "-" reads stdin.
On success it prints "verified: <platform>/<job id> (key <keyid>)" and the signed record.

Only the record printed is vouched for by the signature: fields of an export beside its
envelope are not.

The installation publishes its public keys in a ConfigMap anyone may read; save them with
  kubectl -n <namespace> get configmap hyperfleet-provenance-public-key \
    -o jsonpath='{.data.public\.pem}' > public.pem
and, for records signed before a key rotation, each previous-*.pem key of that ConfigMap
(kubectl ... -o jsonpath='{.data.previous-<id>\.pem}'). A file may hold several keys. Keep a
copy of the keys you trust: whoever can change the ConfigMap can change what it says.

Exit status: 0 verified, 1 not verified (the reason is printed), 2 bad usage or unreadable keys.

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hyperfleet-verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var keyFiles stringList
	fs.Var(&keyFiles, "key", "PEM file with the installation's public key(s); repeat for previous keys")
	quiet := fs.Bool("quiet", false, "print only the verified line, not the record")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	inputs, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return exitVerified
	}
	if err != nil {
		return exitUsage
	}
	if len(keyFiles) == 0 || len(inputs) != 1 {
		fmt.Fprintln(stderr, "hyperfleet-verify: need at least one --key and exactly one record (a file or -)")
		fs.Usage()
		return exitUsage
	}

	keys, err := loadKeys(keyFiles)
	if err != nil {
		fmt.Fprintln(stderr, "hyperfleet-verify:", err)
		return exitUsage
	}
	data, err := readInput(inputs[0], stdin)
	if err != nil {
		fmt.Fprintln(stderr, "hyperfleet-verify: not verified:", err)
		return exitNotVerified
	}
	env, err := findEnvelope(data)
	if err != nil {
		fmt.Fprintln(stderr, "hyperfleet-verify: not verified:", err)
		return exitNotVerified
	}
	st, pub, err := provenance.VerifyKey(env, keys...)
	if err != nil {
		fmt.Fprintln(stderr, "hyperfleet-verify: not verified:", err)
		return exitNotVerified
	}
	keyID, err := provenance.KeyID(pub)
	if err != nil {
		fmt.Fprintln(stderr, "hyperfleet-verify:", err)
		return exitNotVerified
	}
	fmt.Fprintf(stdout, "verified: %s (key %s)\n", st.Subject[0].Name, keyID)
	if !*quiet {
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, st.Predicate, "", "  "); err != nil {
			pretty.Write(st.Predicate)
		}
		pretty.WriteByte('\n')
		_, _ = stdout.Write(pretty.Bytes())
	}
	return exitVerified
}

// parseInterspersed lets flags come after the record's name too, as in "hyperfleet-verify
// record.json --key public.pem".
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func loadKeys(files []string) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("--key: %w", err)
		}
		parsed, err := provenance.ParsePublicKeysPEM(data)
		if err != nil {
			return nil, fmt.Errorf("--key %s: %w", name, err)
		}
		keys = append(keys, parsed...)
	}
	return keys, nil
}

func readInput(name string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxInput {
		return nil, fmt.Errorf("%s is larger than %d MiB, no job record is", name, maxInput>>20)
	}
	return data, nil
}

type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
