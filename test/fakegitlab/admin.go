package fakegitlab

import (
	"encoding/json"
	"net/http"
	"time"
)

// Admin endpoints, unauthenticated, for the local fleet and scripts (`make jobs`): list every
// job and create one in a project, as a push would.
const (
	EndpointFakeJobs      = "GET /_fake/jobs"
	EndpointFakeCreateJob = "POST /_fake/jobs"
)

// AdminJob is a job as the admin endpoints show it.
type AdminJob struct {
	ID           int64      `json:"id"`
	Project      string     `json:"project"`
	Name         string     `json:"name"`
	Tags         []string   `json:"tags"`
	Ref          string     `json:"ref"`
	Status       JobStatus  `json:"status"`
	Runner       string     `json:"runner,omitempty"` // the description of the runner that took it
	Acquisitions int        `json:"acquisitions"`
	CreatedAt    time.Time  `json:"created_at"`
	StartedAt    *time.Time `json:"started_at,omitempty"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
}

// AdminJobRequest creates a job: POST /_fake/jobs {"project", "tags", "name", "ref", "status"}.
type AdminJobRequest struct {
	Project string    `json:"project"`
	Tags    []string  `json:"tags"`
	Name    string    `json:"name"`
	Ref     string    `json:"ref"`
	Status  JobStatus `json:"status"`
}

func (s *Server) adminRoutes() {
	s.handleRunner(EndpointFakeJobs, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.AdminJobs())
	})
	s.handleRunner(EndpointFakeCreateJob, func(w http.ResponseWriter, r *http.Request) {
		var req AdminJobRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
			writeBadRequest(w, "body is not {project, tags, name}")
			return
		}
		if req.Status != "" && !validStatus(req.Status) {
			writeBadRequest(w, "status does not have a valid value")
			return
		}
		s.mu.Lock()
		known := s.projectLocked(req.Project) != nil
		s.mu.Unlock()
		if !known {
			writeMessage(w, http.StatusNotFound, "404 Project Not Found")
			return
		}
		j := s.CreateJob(req.Project, JobSpec{Name: req.Name, Tags: req.Tags, Ref: req.Ref, Status: req.Status})
		writeJSON(w, http.StatusCreated, s.adminJob(j))
	})
}

// AdminJobs returns every job as the admin endpoint lists it, oldest first.
func (s *Server) AdminJobs() []AdminJob {
	jobs := s.Jobs()
	out := make([]AdminJob, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, s.adminJob(j))
	}
	return out
}

func (s *Server) adminJob(j Job) AdminJob {
	s.mu.Lock()
	p := s.projects[j.ProjectID]
	s.mu.Unlock()
	a := AdminJob{ID: j.ID, Project: p.PathWithNamespace, Name: j.Name, Tags: nonNil(j.Tags), Ref: j.Ref, Status: j.Status,
		Runner: j.RunnerDescription, Acquisitions: j.Acquisitions, CreatedAt: j.CreatedAt}
	if !j.StartedAt.IsZero() {
		a.StartedAt = &j.StartedAt
	}
	if !j.FinishedAt.IsZero() {
		a.FinishedAt = &j.FinishedAt
	}
	return a
}

// VerifyEachJobRanOnce checks that every job that ran was handed to a runner exactly once.
func (s *Server) VerifyEachJobRanOnce() error {
	for _, j := range s.Jobs() {
		if j.Acquisitions > 1 {
			return &StatusError{StatusCode: http.StatusConflict, Body: "job " + j.Name + " was handed out more than once"}
		}
	}
	return nil
}
