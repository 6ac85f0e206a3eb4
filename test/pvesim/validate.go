package pvesim

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/hyperfleet-io/hyperfleet/test/pvesim/schema"
)

// This file mirrors PVE::JSONSchema's check_object/check_prop/check_type,
// including their error texts, for the parameters of one API call.

// indexedMax bounds the n of collapsed "name[n]" parameters (PVE's MAX_* constants).
var indexedMax = map[string]int{
	"net": 31, "ipconfig": 31, "scsi": 30, "virtio": 15, "sata": 5, "ide": 3,
	"unused": 255, "usb": 13, "hostpci": 15, "serial": 3, "parallel": 2,
	"numa": 7, "virtiofs": 9, "mp": 255,
}

var indexedRe = regexp.MustCompile(`^([a-z][a-z_\-]*?)(\d+)$`)

// lookupProp finds the schema for key, mapping "net0" to "net[n]".
func lookupProp(props map[string]*schema.Property, key string) *schema.Property {
	if p, ok := props[key]; ok {
		return p
	}
	m := indexedRe.FindStringSubmatch(key)
	if m == nil {
		return nil
	}
	p, ok := props[m[1]+"[n]"]
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(m[2])
	if err != nil || (len(m[2]) > 1 && m[2][0] == '0') {
		return nil
	}
	if max, ok := indexedMax[m[1]]; ok && n > max {
		return nil
	}
	return p
}

// validateParams returns PVE's per-parameter error map, empty when valid.
func validateParams(sch *schema.Property, p params) map[string]string {
	errs := map[string]string{}
	if sch == nil {
		return errs
	}
	for name, prop := range sch.Properties {
		if strings.HasSuffix(name, "[n]") {
			continue
		}
		v, ok := p[name]
		checkProp(errs, name, prop, v, ok)
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, direct := sch.Properties[k]; direct {
			if req := sch.Properties[k].Requires; req != "" {
				if _, ok := p[req]; !ok {
					addError(errs, req, "missing property required by '"+k+"'")
				}
			}
			continue
		}
		prop := lookupProp(sch.Properties, k)
		if prop == nil {
			if sch.AdditionalProperties == nil || *sch.AdditionalProperties == 0 {
				addError(errs, k, "property is not defined in schema and the schema does not allow additional properties")
			}
			continue
		}
		checkProp(errs, k, prop, p[k], true)
	}
	return errs
}

// addError joins several errors for one path with a literal backslash-n, as
// PVE's add_error does with its single-quoted '\n'.
func addError(errs map[string]string, path, msg string) {
	if path == "" {
		path = "_root"
	}
	if old, ok := errs[path]; ok {
		errs[path] = old + `\n` + msg
		return
	}
	errs[path] = msg
}

func checkProp(errs map[string]string, path string, prop *schema.Property, v pval, present bool) {
	if prop.Alias != "" {
		return
	}
	if !present {
		if prop.Optional == 0 {
			addError(errs, path, "property is missing and it is not optional")
		}
		return
	}
	if !checkType(errs, path, prop.Type, v) {
		return
	}
	if v.ref != "" {
		return // JSON booleans pass without further checks, as in PVE
	}
	value := v.s
	if prop.Format != "" || prop.FormatProps != nil {
		if msg := checkFormat(prop, value, path); msg != "" {
			addError(errs, path, "invalid format - "+msg)
			return
		}
	}
	if prop.Pattern != "" {
		if re := compilePattern(prop.Pattern); re != nil && !re.MatchString(value) {
			addError(errs, path, "value does not match the regex pattern")
			return
		}
	}
	if prop.MaxLength != nil && len([]rune(value)) > *prop.MaxLength {
		addError(errs, path, "value may only be "+strconv.Itoa(*prop.MaxLength)+" characters long")
		return
	}
	if prop.MinLength != nil && len([]rune(value)) < *prop.MinLength {
		addError(errs, path, "value must be at least "+strconv.Itoa(*prop.MinLength)+" characters long")
		return
	}
	if isNumber(value) {
		f, _ := strconv.ParseFloat(value, 64)
		if prop.Maximum != nil && f > float64(*prop.Maximum) {
			addError(errs, path, "value must have a maximum value of "+prop.Maximum.String())
			return
		}
		if prop.Minimum != nil && f < float64(*prop.Minimum) {
			addError(errs, path, "value must have a minimum value of "+prop.Minimum.String())
			return
		}
	}
	if len(prop.Enum) > 0 {
		for _, e := range prop.Enum {
			if e == value {
				return
			}
		}
		addError(errs, path, "value '"+value+"' does not have a value in the enumeration '"+strings.Join(prop.Enum, ", ")+"'")
	}
}

var (
	numberRe  = regexp.MustCompile(`^[+-]?(\d+\.\d+|\d+\.|\.\d+|\d+)([eE][+-]?\d+)?$`)
	integerRe = regexp.MustCompile(`^[+-]?\d+$`)
)

func isNumber(v string) bool { return numberRe.MatchString(v) }

func checkType(errs map[string]string, path, typ string, v pval) bool {
	if v.ref != "" {
		if typ == "boolean" && v.ref == "JSON::PP::Boolean" {
			return true
		}
		if typ == "" || (typ == "array" && v.ref == "ARRAY") || (typ == "object" && v.ref == "HASH") {
			return true
		}
		addError(errs, path, "type check ('"+typ+"') failed - got "+v.ref)
		return false
	}
	switch typ {
	case "boolean":
		if v.s == "0" || v.s == "1" {
			return true
		}
	case "integer":
		if integerRe.MatchString(v.s) {
			return true
		}
	case "number":
		if isNumber(v.s) {
			return true
		}
	case "array", "object":
		addError(errs, path, "type check ('"+typ+"') failed")
		return false
	default:
		return true
	}
	addError(errs, path, "type check ('"+typ+"') failed - got '"+v.s+"'")
	return false
}

var patternCache sync.Map

// compilePattern anchors a PVE (Perl) pattern like `m/^$pattern$/`. Patterns
// Go's RE2 cannot express are skipped rather than rejected.
func compilePattern(p string) *regexp.Regexp {
	if re, ok := patternCache.Load(p); ok {
		return re.(*regexp.Regexp)
	}
	// Perl's "(?^i:...)" (a group with default flags plus i) is RE2's "(?i:...)".
	re, err := regexp.Compile("^" + strings.ReplaceAll(p, "(?^i:", "(?i:") + "$")
	if err != nil {
		return nil
	}
	patternCache.Store(p, re)
	return re
}
