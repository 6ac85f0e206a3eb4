//go:build ignore

// gen-pve-schema extracts the subset of the Proxmox VE API schema that the
// HyperFleet PVE simulator (test/pvesim) serves and validates against.
//
// The input is the pve-docs apidata.js schema (the JSON array from
// api-viewer/apidata.js with its JavaScript wrapper removed). Run from the
// repository root:
//
//	go run hack/gen-pve-schema.go <path-to-pve-api-schema.json>
//
// It writes test/pvesim/schema/pve-api-subset.json. Descriptions are dropped to
// keep the file small; types, enums, patterns, formats (including inline
// property-string formats), bounds, optionality and permission checks are kept.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// endpoints lists every method and path template the simulator implements.
var endpoints = []string{
	"GET /version",
	"POST /access/ticket",
	"GET /access/permissions",
	"GET /cluster/mapping/pci",
	"GET /cluster/nextid",
	"GET /cluster/resources",
	"GET /cluster/status",
	"GET /cluster/tasks",
	"GET /nodes",
	"GET /nodes/{node}/status",
	"GET /nodes/{node}/lxc",
	"GET /nodes/{node}/qemu",
	"DELETE /nodes/{node}/qemu/{vmid}",
	"GET /nodes/{node}/qemu/{vmid}/config",
	"POST /nodes/{node}/qemu/{vmid}/config",
	"PUT /nodes/{node}/qemu/{vmid}/config",
	"GET /nodes/{node}/qemu/{vmid}/pending",
	"GET /nodes/{node}/qemu/{vmid}/status/current",
	"POST /nodes/{node}/qemu/{vmid}/status/start",
	"POST /nodes/{node}/qemu/{vmid}/status/stop",
	"POST /nodes/{node}/qemu/{vmid}/status/shutdown",
	"POST /nodes/{node}/qemu/{vmid}/status/reboot",
	"POST /nodes/{node}/qemu/{vmid}/status/reset",
	"POST /nodes/{node}/qemu/{vmid}/clone",
	"PUT /nodes/{node}/qemu/{vmid}/resize",
	"POST /nodes/{node}/qemu/{vmid}/template",
	"GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
	"GET /nodes/{node}/qemu/{vmid}/agent/get-host-name",
	"GET /nodes/{node}/qemu/{vmid}/agent/get-osinfo",
	"POST /nodes/{node}/qemu/{vmid}/agent/ping",
	"POST /nodes/{node}/qemu/{vmid}/agent/exec",
	"GET /nodes/{node}/qemu/{vmid}/agent/exec-status",
	"GET /nodes/{node}/qemu/{vmid}/snapshot",
	"POST /nodes/{node}/qemu/{vmid}/snapshot",
	"DELETE /nodes/{node}/qemu/{vmid}/snapshot/{snapname}",
	"GET /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config",
	"PUT /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config",
	"POST /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback",
	"GET /nodes/{node}/qemu/{vmid}/migrate",
	"POST /nodes/{node}/qemu/{vmid}/migrate",
	"GET /nodes/{node}/tasks",
	"DELETE /nodes/{node}/tasks/{upid}",
	"GET /nodes/{node}/tasks/{upid}/status",
	"GET /nodes/{node}/tasks/{upid}/log",
	"GET /nodes/{node}/storage",
	"GET /nodes/{node}/storage/{storage}/status",
	"GET /nodes/{node}/storage/{storage}/content",
	"GET /nodes/{node}/storage/{storage}/content/{volume}",
	"DELETE /nodes/{node}/storage/{storage}/content/{volume}",
	"POST /nodes/{node}/storage/{storage}/upload",
	"GET /pools",
	"POST /pools",
	"PUT /pools",
	"DELETE /pools",
	"GET /pools/{poolid}",
	"PUT /pools/{poolid}",
	"DELETE /pools/{poolid}",
	"GET /cluster/sdn",
	"PUT /cluster/sdn",
	"GET /cluster/sdn/zones",
	"POST /cluster/sdn/zones",
	"GET /cluster/sdn/zones/{zone}",
	"PUT /cluster/sdn/zones/{zone}",
	"DELETE /cluster/sdn/zones/{zone}",
	"GET /cluster/sdn/vnets",
	"POST /cluster/sdn/vnets",
	"GET /cluster/sdn/vnets/{vnet}",
	"PUT /cluster/sdn/vnets/{vnet}",
	"DELETE /cluster/sdn/vnets/{vnet}",
	"GET /cluster/sdn/vnets/{vnet}/subnets",
	"POST /cluster/sdn/vnets/{vnet}/subnets",
	"GET /cluster/sdn/vnets/{vnet}/subnets/{subnet}",
	"PUT /cluster/sdn/vnets/{vnet}/subnets/{subnet}",
	"DELETE /cluster/sdn/vnets/{vnet}/subnets/{subnet}",
	"POST /cluster/sdn/vnets/{vnet}/ips",
	"PUT /cluster/sdn/vnets/{vnet}/ips",
	"DELETE /cluster/sdn/vnets/{vnet}/ips",
	"GET /cluster/sdn/ipams/{ipam}/status",
	"GET /cluster/firewall/groups",
	"POST /cluster/firewall/groups",
	"GET /cluster/firewall/groups/{group}",
	"POST /cluster/firewall/groups/{group}",
	"DELETE /cluster/firewall/groups/{group}",
	"GET /cluster/firewall/groups/{group}/{pos}",
	"PUT /cluster/firewall/groups/{group}/{pos}",
	"DELETE /cluster/firewall/groups/{group}/{pos}",
	"GET /nodes/{node}/qemu/{vmid}/firewall/rules",
	"POST /nodes/{node}/qemu/{vmid}/firewall/rules",
	"GET /nodes/{node}/qemu/{vmid}/firewall/rules/{pos}",
	"PUT /nodes/{node}/qemu/{vmid}/firewall/rules/{pos}",
	"DELETE /nodes/{node}/qemu/{vmid}/firewall/rules/{pos}",
	"GET /nodes/{node}/qemu/{vmid}/firewall/options",
	"PUT /nodes/{node}/qemu/{vmid}/firewall/options",
	"GET /storage",
	"POST /storage",
	"GET /storage/{storage}",
	"DELETE /storage/{storage}",
	"GET /cluster/replication",
	"POST /cluster/replication",
	"GET /cluster/replication/{id}",
	"PUT /cluster/replication/{id}",
	"DELETE /cluster/replication/{id}",
	"GET /nodes/{node}/replication/{id}/status",
	"POST /nodes/{node}/replication/{id}/schedule_now",
}

type node struct {
	Path     string                     `json:"path"`
	Children []node                     `json:"children"`
	Info     map[string]json.RawMessage `json:"info"`
}

// dropped holds documentation-only keys that validation never reads.
var dropped = map[string]bool{
	"description":         true,
	"verbose_description": true,
	"format_description":  true,
	"completion":          true,
	"typetext":            true,
	"links":               true,
	"default":             true,
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run hack/gen-pve-schema.go <pve-api-schema.json>")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail(err)
	}
	var roots []node
	if err := json.Unmarshal(raw, &roots); err != nil {
		fail(err)
	}
	byPath := map[string]node{}
	var walk func(n node)
	walk = func(n node) {
		byPath[n.Path] = n
		for _, c := range n.Children {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}

	out := []map[string]any{}
	sorted := append([]string(nil), endpoints...)
	sort.Strings(sorted)
	for _, ep := range sorted {
		method, path, _ := strings.Cut(ep, " ")
		n, ok := byPath[path]
		if !ok {
			fail(fmt.Errorf("path %s not in schema", path))
		}
		infoRaw, ok := n.Info[method]
		if !ok {
			fail(fmt.Errorf("%s not in schema", ep))
		}
		var info map[string]any
		if err := json.Unmarshal(infoRaw, &info); err != nil {
			fail(err)
		}
		entry := map[string]any{"method": method, "path": path}
		for _, k := range []string{"parameters", "permissions", "allowtoken", "protected"} {
			if v, ok := info[k]; ok {
				entry[k] = strip(v)
			}
		}
		if ret, ok := info["returns"].(map[string]any); ok {
			entry["returns"] = map[string]any{"type": ret["type"]}
		}
		out = append(out, entry)
	}

	doc := map[string]any{
		"source":    "pve-docs api-viewer/apidata.js (Proxmox VE 9.1), generated by hack/gen-pve-schema.go",
		"endpoints": out,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(doc); err != nil {
		fail(err)
	}
	dst := "test/pvesim/schema/pve-api-subset.json"
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		fail(err)
	}
	fmt.Printf("wrote %s (%d endpoints, %d bytes)\n", dst, len(out), buf.Len())
}

// strip removes documentation-only keys from a schema object recursively.
// Maps keyed by property name ("properties", inline property-string
// "format"s) keep every key, since a parameter may itself be called
// "description".
func strip(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, val := range t {
			if dropped[k] {
				continue
			}
			if sub, ok := val.(map[string]any); ok && (k == "properties" || k == "format") {
				named := map[string]any{}
				for name, prop := range sub {
					named[name] = strip(prop)
				}
				m[k] = named
				continue
			}
			m[k] = strip(val)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, val := range t {
			s[i] = strip(val)
		}
		return s
	default:
		return v
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen-pve-schema:", err)
	os.Exit(1)
}
