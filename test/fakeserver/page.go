package fakeserver

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// LinkPage serves page (from 1) of n items perPage at a time as GitHub and Buildkite do: it
// returns the half-open index range of the page's items and sets the Link header their clients
// follow (next and last unless on the last page, first and prev unless on the first), each link
// being root and r's path and query with page and per_page set.
func LinkPage(w http.ResponseWriter, r *http.Request, root string, n, page, perPage int) (start, end int) {
	start = min((page-1)*perPage, n)
	end = min(start+perPage, n)
	last := max((n+perPage-1)/perPage, 1)
	link := func(p int, rel string) string {
		u := url.URL{Path: r.URL.Path}
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(perPage))
		u.RawQuery = q.Encode()
		return fmt.Sprintf("<%s%s>; rel=%q", root, u.String(), rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(page-1, "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	return start, end
}
