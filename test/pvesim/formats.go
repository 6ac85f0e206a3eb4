package pvesim

import (
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/test/pvesim/schema"
)

// This file mirrors the PVE format validators HyperFleet's requests touch
// (PVE::JSONSchema::check_format and parse_property_string). Unknown named
// formats are accepted.

var (
	vmidRe     = regexp.MustCompile(`^[1-9][0-9]{2,8}$`)
	nodeNameRe = regexp.MustCompile(`^([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)$`)
	tagRe      = regexp.MustCompile(`^(?i)[a-z0-9_][a-z0-9_\-+.]*$`)
	dnsNameRe  = regexp.MustCompile(`^(([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)\.)*([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)$`)
	configIDRe = regexp.MustCompile(`^(?i)[a-z][a-z0-9_-]+$`)
	idRe       = regexp.MustCompile(`^(?i)[a-z][a-z0-9\-_.]*[a-z0-9]$`)
	bridgeRe   = regexp.MustCompile(`^[-_.\w\d]+$`)
	macRe      = regexp.MustCompile(`^(?i)[a-f0-9][02468ace](?::[a-f0-9]{2}){5}$`)
	urlencRe   = regexp.MustCompile(`^[-%a-zA-Z0-9_.!~*'()]*$`)
	volumeIDRe = regexp.MustCompile(`^(?i)([a-z][a-z0-9\-_.]*[a-z0-9]):(.+)$`)
)

// formatValidators are PVE's code-ref formats: they return an error message
// (ending in "\n", as PVE's die does) or "".
var formatValidators = map[string]func(string) string{
	"pve-vmid": func(v string) string {
		if !vmidRe.MatchString(v) {
			return "value does not look like a valid VM ID\n"
		}
		return ""
	},
	"pve-node": func(v string) string {
		if !nodeNameRe.MatchString(v) {
			return "value does not look like a valid node name\n"
		}
		return ""
	},
	"pve-tag": func(v string) string {
		if !tagRe.MatchString(v) {
			return "invalid characters in tag\n"
		}
		return ""
	},
	"dns-name": func(v string) string {
		if !dnsNameRe.MatchString(v) {
			return "value does not look like a valid DNS name\n"
		}
		return ""
	},
	"pve-configid": func(v string) string {
		if !configIDRe.MatchString(v) {
			return fmt.Sprintf("invalid configuration ID '%s'\n", v)
		}
		return ""
	},
	"pve-storage-id": func(v string) string {
		if !idRe.MatchString(v) {
			return fmt.Sprintf("storage ID '%s' contains illegal characters\n", v)
		}
		return ""
	},
	"pve-poolid": func(v string) string {
		if !regexp.MustCompile(`^[A-Za-z0-9_\-]+$`).MatchString(v) {
			return fmt.Sprintf("invalid pool ID '%s'\n", v)
		}
		return ""
	},
	"pve-bridge-id": func(v string) string {
		if !bridgeRe.MatchString(v) {
			return fmt.Sprintf("invalid bridge ID '%s'\n", v)
		}
		return ""
	},
	"mac-addr": func(v string) string {
		if !macRe.MatchString(v) {
			return "value does not look like a valid unicast MAC address\n"
		}
		return ""
	},
	"urlencoded": func(v string) string {
		if !urlencRe.MatchString(v) {
			return fmt.Sprintf("invalid urlencoded string: %s\n", v)
		}
		return ""
	},
	"pve-volume-id": func(v string) string {
		if !volumeIDRe.MatchString(v) {
			return fmt.Sprintf("unable to parse volume ID '%s'\n", v)
		}
		return ""
	},
	"pve-sdn-zone-id": func(v string) string { return checkSDNID("zone", v) },
	"pve-sdn-vnet-id": func(v string) string { return checkSDNID("vnet", v) },
	"ip": func(v string) string {
		if net.ParseIP(v) == nil {
			return "value does not look like a valid IP address\n"
		}
		return ""
	},
	"ipv4": func(v string) string {
		if ip := net.ParseIP(v); ip == nil || ip.To4() == nil || strings.Contains(v, ":") {
			return "value does not look like a valid IPv4 address\n"
		}
		return ""
	},
}

func init() {
	// Registered here: these validators recurse into checkProp, which reads this map.
	formatValidators["pve-qm-ipconfig"] = func(v string) string { return checkPropertyString(ipconfigFormat, v, "") }
	formatValidators["pve-qm-cicustom"] = func(v string) string { return checkPropertyString(cicustomFormat, v, "") }
	formatValidators["pve-qm-boot"] = func(v string) string { return checkPropertyString(bootFormat, v, "") }
}

// Named hash formats the schema dump references by name only.
var (
	strProp        = &schema.Property{Type: "string", Optional: 1}
	ipconfigFormat = map[string]*schema.Property{"ip": strProp, "gw": strProp, "ip6": strProp, "gw6": strProp}
	cicustomFormat = map[string]*schema.Property{
		"meta": {Type: "string", Optional: 1, Format: "pve-volume-id"}, "network": {Type: "string", Optional: 1, Format: "pve-volume-id"},
		"user": {Type: "string", Optional: 1, Format: "pve-volume-id"}, "vendor": {Type: "string", Optional: 1, Format: "pve-volume-id"},
	}
	bootFormat = map[string]*schema.Property{
		"legacy": {Type: "string", Optional: 1, DefaultKey: 1, Pattern: `[acdn]{1,4}`},
		"order":  {Type: "string", Optional: 1},
	}
)

// checkFormat returns PVE's format error (without the "invalid format - " prefix).
func checkFormat(prop *schema.Property, value, path string) string {
	if prop.FormatProps != nil {
		return checkPropertyString(prop.FormatProps, value, path)
	}
	name, kind := prop.Format, ""
	if base, ok := strings.CutSuffix(name, "-list"); ok {
		name, kind = base, "list"
	} else if base, ok := strings.CutSuffix(name, "-opt"); ok {
		name, kind = base, "opt"
	}
	fn, ok := formatValidators[name]
	if !ok {
		return ""
	}
	switch kind {
	case "list":
		for _, item := range splitList(value) {
			if msg := fn(item); msg != "" {
				return msg
			}
		}
		return ""
	case "opt":
		if value == "" {
			return ""
		}
	}
	return fn(value)
}

// splitList is PVE::Tools::split_list.
func splitList(v string) []string {
	if strings.Contains(v, "\x00") {
		return strings.Split(v, "\x00")
	}
	v = strings.NewReplacer(",", " ", ";", " ").Replace(v)
	return strings.Fields(v)
}

// parsePropertyString is PVE's parse_property_string: "virtio=AA:..,bridge=vmbr0"
// to a map, resolving default keys and key aliases (virtio= is model=virtio,macaddr=).
func parsePropertyString(format map[string]*schema.Property, data string) (map[string]string, string) {
	res := map[string]string{}
	defaultKey := ""
	for _, part := range strings.Split(data, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, hasEq := strings.Cut(part, "=")
		if hasEq && k != "" && v != "" {
			if _, dup := res[k]; dup {
				return nil, "duplicate key in comma-separated list property: " + k + "\n"
			}
			sch := format[k]
			if sch != nil && sch.Alias != "" {
				if sch.KeyAlias != "" {
					if _, dup := res[sch.KeyAlias]; dup {
						return nil, "key alias '" + sch.KeyAlias + "' is already defined\n"
					}
					res[sch.KeyAlias] = k
				}
				k = sch.Alias
				sch = format[k]
				if _, dup := res[k]; dup {
					return nil, "key '" + k + "' is already defined (via alias)\n"
				}
			}
			if sch == nil {
				return nil, "invalid key in comma-separated list property: " + k + "\n"
			}
			if sch.Type == "boolean" {
				v = parseBoolean(v)
			}
			res[k] = v
			continue
		}
		if !hasEq {
			if defaultKey != "" {
				return nil, "duplicate key in comma-separated list property: " + defaultKey + "\n"
			}
			for key, sch := range format {
				if sch.DefaultKey == 0 {
					continue
				}
				defaultKey = key
				if _, dup := res[key]; dup {
					return nil, "duplicate key in comma-separated list property: " + key + "\n"
				}
				if sch.Type == "boolean" {
					part = parseBoolean(part)
				}
				res[key] = part
				break
			}
			if defaultKey == "" {
				return nil, "value without key, but schema does not define a default key\n"
			}
			continue
		}
		return nil, "missing key in comma-separated list property\n"
	}
	return res, ""
}

func parseBoolean(v string) string {
	switch strings.ToLower(v) {
	case "1", "on", "yes", "true":
		return "1"
	case "0", "off", "no", "false":
		return "0"
	}
	return v
}

// checkPropertyString parses and validates a property string; a schema
// violation is PVE's "format error" exception, stringified with its errors.
func checkPropertyString(format map[string]*schema.Property, value, path string) string {
	res, msg := parsePropertyString(format, value)
	if msg != "" {
		return msg
	}
	errs := map[string]string{}
	for name, prop := range format {
		v, ok := res[name]
		checkProp(errs, joinPath(path, name), prop, pval{s: v}, ok)
	}
	if len(errs) == 0 {
		return ""
	}
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := "format error\n"
	for _, k := range keys {
		out += k + ": " + errs[k] + "\n"
	}
	return out
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
