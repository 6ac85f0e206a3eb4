package gitlab

import "errors"

// Scope is where a pool's runners are created and its jobs looked for: exactly one of the
// whole instance (instance runners, for every project), a group by full path (group runners,
// for every project below it, subgroups included) or a project by full path.
type Scope struct {
	Instance bool
	Group    string
	Project  string
}

// Validate checks that exactly one member is set.
func (s Scope) Validate() error {
	n := 0
	for _, set := range []bool{s.Instance, s.Group != "", s.Project != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("a GitLab scope is exactly one of the instance, a group or a project")
	}
	return nil
}

// String is the project's or group's path, or "(instance)".
func (s Scope) String() string {
	switch {
	case s.Project != "":
		return s.Project
	case s.Group != "":
		return s.Group
	case s.Instance:
		return "(instance)"
	}
	return ""
}

// runnerType is the runner_type POST /user/runners takes for the scope.
func (s Scope) runnerType() string {
	switch {
	case s.Project != "":
		return "project_type"
	case s.Group != "":
		return "group_type"
	default:
		return "instance_type"
	}
}
