package pvesim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The admin endpoint lets other processes steer the simulator (it is not
// part of the PVE API and needs no authentication; the simulator only
// listens on loopback by default):
//
//	GET    /_sim/vms                     VMs as JSON (the VM type)
//	POST   /_sim/vms/{vmid}/poweroff     guest-initiated shutdown
//	DELETE /_sim/vms/{vmid}              remove a VM out of band
//	GET    /_sim/faults                  installed faults by ID
//	POST   /_sim/faults                  install a fault (JSON Fault; durations as "250ms")
//	DELETE /_sim/faults                  remove every fault
//	DELETE /_sim/faults/{id}             remove one fault
//	GET    /_sim/requests                request counters
//	DELETE /_sim/requests                reset the counters
//	GET    /_sim/load                    load model parameters and counters (LoadStats)
//	POST   /_sim/nodes/{node}/offline    take a node offline (and .../online)
func (s *Simulator) serveAdmin(w http.ResponseWriter, r *http.Request) {
	parts := splitPath(strings.TrimPrefix(r.URL.Path, "/_sim"))
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	fail := func(code int, msg string) { reply(code, map[string]string{"error": msg}) }
	route := r.Method + " " + strings.Join(parts, "/")
	switch {
	case route == "GET vms":
		reply(http.StatusOK, s.VMs())
	case route == "GET load":
		reply(http.StatusOK, map[string]any{"model": s.LoadModel(), "summary": s.LoadModel().String(), "stats": s.LoadStats()})
	case len(parts) == 3 && parts[0] == "vms" && parts[2] == "poweroff" && r.Method == http.MethodPost:
		vmid, _ := strconv.Atoi(parts[1])
		if err := s.PowerOff(vmid); err != nil {
			fail(http.StatusConflict, err.Error())
			return
		}
		reply(http.StatusOK, map[string]any{"vmid": vmid, "status": "stopped"})
	case len(parts) == 2 && parts[0] == "vms" && r.Method == http.MethodDelete:
		vmid, _ := strconv.Atoi(parts[1])
		if err := s.RemoveVM(vmid); err != nil {
			fail(http.StatusNotFound, err.Error())
			return
		}
		reply(http.StatusOK, map[string]any{"vmid": vmid, "removed": true})
	case route == "GET faults":
		reply(http.StatusOK, s.Faults())
	case route == "POST faults":
		var af adminFault
		if err := json.NewDecoder(r.Body).Decode(&af); err != nil {
			fail(http.StatusBadRequest, err.Error())
			return
		}
		f, err := af.fault()
		if err != nil {
			fail(http.StatusBadRequest, err.Error())
			return
		}
		reply(http.StatusCreated, map[string]string{"id": s.InjectFault(f)})
	case route == "DELETE faults":
		s.ClearFaults()
		reply(http.StatusOK, map[string]bool{"cleared": true})
	case len(parts) == 2 && parts[0] == "faults" && r.Method == http.MethodDelete:
		if !s.RemoveFault(parts[1]) {
			fail(http.StatusNotFound, "no such fault")
			return
		}
		reply(http.StatusOK, map[string]bool{"removed": true})
	case route == "GET requests":
		reply(http.StatusOK, s.Requests())
	case route == "DELETE requests":
		s.ResetRequests()
		reply(http.StatusOK, map[string]bool{"reset": true})
	case len(parts) == 3 && parts[0] == "nodes" && r.Method == http.MethodPost && (parts[2] == "offline" || parts[2] == "online"):
		if err := s.SetNodeOnline(parts[1], parts[2] == "online"); err != nil {
			fail(http.StatusNotFound, err.Error())
			return
		}
		reply(http.StatusOK, map[string]string{"node": parts[1], "state": parts[2]})
	default:
		fail(http.StatusNotFound, "no such admin route: "+r.Method+" "+r.URL.Path)
	}
}

// adminFault is Fault with human-readable durations for JSON clients.
type adminFault struct {
	Fault
	Latency      string `json:"latency,omitempty"`
	TaskDuration string `json:"taskDuration,omitempty"`
}

func (a adminFault) fault() (Fault, error) {
	f := a.Fault
	var err error
	if a.Latency != "" {
		if f.Latency, err = time.ParseDuration(a.Latency); err != nil {
			return f, err
		}
	}
	if a.TaskDuration != "" {
		if f.TaskDuration, err = time.ParseDuration(a.TaskDuration); err != nil {
			return f, err
		}
	}
	return f, nil
}
