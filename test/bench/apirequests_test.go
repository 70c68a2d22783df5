//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// apiRequests reads the API server's own count of the requests it served,
// apiserver_request_total, summed by verb and resource ("PATCH
// stacks/status"), leaving out the kinds of request the bench itself
// makes in bulk (watches and the creates of its Stacks are counted: the
// caller subtracts what it made).
func (h *harness) apiRequests() (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(h.env.Config)
	if err != nil {
		return nil, err
	}
	body, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels := line[strings.Index(line, "{")+1 : strings.LastIndex(line, "}")]
		verb, resource, sub := labelOf(labels, "verb"), labelOf(labels, "resource"), labelOf(labels, "subresource")
		if verb == "WATCH" || verb == "CONNECT" {
			continue
		}
		if sub != "" {
			resource += "/" + sub
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		out[verb+" "+resource] += v
	}
	return out, sc.Err()
}

// labelOf returns the value of label name in a Prometheus label list.
func labelOf(labels, name string) string {
	i := strings.Index(labels, name+`="`)
	if i < 0 || (i > 0 && labels[i-1] != ',') {
		return ""
	}
	rest := labels[i+len(name)+2:]
	return rest[:strings.Index(rest, `"`)]
}

// requestsPer returns after minus before, divided by n, keeping what is
// at least 0.05 per unit, and a line listing them, largest first.
func requestsPer(before, after map[string]float64, n int) (map[string]float64, string) {
	out := map[string]float64{}
	var keys []string
	for k, v := range after {
		if d := (v - before[k]) / float64(n); d >= 0.05 {
			out[k] = d
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return out[keys[i]] > out[keys[j]] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %.2f, ", k, out[k])
	}
	return out, strings.TrimSuffix(b.String(), ", ")
}
