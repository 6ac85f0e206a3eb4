package fakeserver

import (
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
)

// TestLinkPage: the page's range is cut from n items, and the Link header names the pages
// around it on the fake's root, keeping the request's other parameters.
func TestLinkPage(t *testing.T) {
	tests := []struct {
		name             string
		n, page, perPage int
		start, end       int
		link             string
	}{
		{name: "a middle page", n: 5, page: 2, perPage: 2, start: 2, end: 4, link: `<https://fake/items?page=3&per_page=2&state=open>; rel="next", ` +
			`<https://fake/items?page=3&per_page=2&state=open>; rel="last", ` +
			`<https://fake/items?page=1&per_page=2&state=open>; rel="first", ` +
			`<https://fake/items?page=1&per_page=2&state=open>; rel="prev"`},
		{name: "the last page", n: 5, page: 3, perPage: 2, start: 4, end: 5, link: `<https://fake/items?page=1&per_page=2&state=open>; rel="first", ` +
			`<https://fake/items?page=2&per_page=2&state=open>; rel="prev"`},
		{name: "the only page", n: 2, page: 1, perPage: 30, start: 0, end: 2},
		{name: "nothing", n: 0, page: 1, perPage: 30, start: 0, end: 0},
		{name: "past the end", n: 3, page: 4, perPage: 2, start: 3, end: 3, link: `<https://fake/items?page=1&per_page=2&state=open>; rel="first", ` +
			`<https://fake/items?page=3&per_page=2&state=open>; rel="prev"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/items?state=open&page=9", nil)
			start, end := LinkPage(w, r, "https://fake", tt.n, tt.page, tt.perPage)
			g.Expect([]int{start, end}).To(Equal([]int{tt.start, tt.end}))
			g.Expect(w.Header().Get("Link")).To(Equal(tt.link))
		})
	}
}
