package helm_test

import (
	"cmp"
	"maps"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	corev1 "k8s.io/api/core/v1"

	"github.com/stackyard/stackyard/internal/shard"
)

// TestRenderShards renders two named shards beside the default one, with
// every listener on: a Deployment per shard, each passing the same
// --shards and its own --shard, each pod labelled with its shard; only the
// default shard serves the cloud API, the dashboard and the receivers, and
// the Services of those and of the artifacts reach its pods alone, while
// the metrics Service reaches every shard's.
func TestRenderShards(t *testing.T) {
	t.Parallel()
	m := render(t, "--set", "shards={blue,green}", "--set", "dashboard.enabled=true", "--set", "cloudAPI.enabled=true", "--set", "receivers.enabled=true")
	deployments := m.ofKind("Deployment")
	if len(deployments) != 3 {
		t.Fatalf("%d Deployments rendered, want 3", len(deployments))
	}
	pods := map[string]labels.Set{}
	for _, u := range deployments {
		o := decodeDeployment(t, u)
		name := o.deployment.Name
		want, known := map[string]string{release: "", release + "-shard-blue": "blue", release + "-shard-green": "green"}[name]
		hub := name == release
		if !known {
			t.Errorf("Deployment %s rendered", name)
			continue
		}
		if o.flags["shard"] != want || o.flags["shards"] != "blue,green" {
			t.Errorf("%s: --shard=%q --shards=%q, want %q and blue,green", name, o.flags["shard"], o.flags["shards"], want)
		}
		if o.flags["leader-elect"] != "true" {
			t.Errorf("%s: no leader election", name)
		}
		for _, flag := range []string{"dashboard-bind-address", "cloud-api-bind-address", "receiver-bind-address"} {
			if _, set := o.flags[flag]; set != hub {
				t.Errorf("%s: --%s set %v, want %v (only the default shard serves it)", name, flag, set, hub)
			}
		}
		podLabels := labels.Set(o.deployment.Spec.Template.Labels)
		if got := podLabels[shard.PodLabel]; got != cmp.Or(want, shard.DefaultName) {
			t.Errorf("%s: pods labelled %s=%q", name, shard.PodLabel, got)
		}
		sel := labels.SelectorFromSet(o.deployment.Spec.Selector.MatchLabels)
		if !sel.Matches(podLabels) {
			t.Errorf("%s: its selector %s does not match its pods %v", name, sel, podLabels)
		}
		pods[name] = podLabels
	}
	// Each named shard's Deployment selects its own pods only.
	// (The default shard's selector predates sharding and cannot change
	// on upgrade; its ReplicaSets tell their pods apart by template hash.)
	for name, podLabels := range pods {
		for other := range pods {
			if other == name || other == release {
				continue
			}
			o := decodeDeployment(t, m.get("Deployment", other))
			if labels.SelectorFromSet(o.deployment.Spec.Selector.MatchLabels).Matches(podLabels) {
				t.Errorf("Deployment %s selects the pods of %s", other, name)
			}
		}
	}

	for _, u := range m.ofKind("Service") {
		var svc corev1.Service
		fromUnstructured(t, u, &svc)
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for name, podLabels := range pods {
			podLabels := maps.Clone(podLabels)
			podLabels["stackyard.dev/leader"] = "true"
			reaches := sel.Matches(podLabels)
			want := name == release || svc.Name == release+"-metrics"
			if reaches != want {
				t.Errorf("Service %s reaches the leader of %s: %v, want %v", svc.Name, name, reaches, want)
			}
		}
	}
}
