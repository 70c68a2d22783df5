package change

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// RolloutMember is a Stack as a rollout orders it: its name and labels.
type RolloutMember struct {
	Name   string
	Labels map[string]string
}

// Waves assigns each Stack of a stage to a wave of the stage's rollout
// (spec.rollout), from 1, and says how many waves there are. Stacks are
// ordered by rollout.order first; wave k holds the Stacks from the end of
// wave k-1 up to the count spec.rollout.waves[k-1] resolves to. Waves
// that would add no Stack are dropped, and a last wave of every Stack is
// added when the list does not reach them all. Without a rollout every
// Stack is in wave 1. It refuses a wave it cannot read, naming it.
func Waves(rollout *promotionv1alpha1.Rollout, stage string, members []RolloutMember) (map[string]int32, int32, error) {
	n := len(members)
	waveOf := make(map[string]int32, n)
	if n == 0 {
		return waveOf, 0, nil
	}
	ordered := Order(rollout, stage, members)
	var ends []int
	if rollout != nil {
		for i, w := range rollout.Waves {
			end, err := resolve(w, n, true)
			if err != nil {
				return nil, 0, fmt.Errorf("spec.rollout.waves[%d]: %w", i, err)
			}
			end = max(end, 1)
			if end > n {
				end = n
			}
			if len(ends) == 0 || end > ends[len(ends)-1] {
				ends = append(ends, end)
			}
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] < n {
		ends = append(ends, n)
	}
	start := 0
	for w, end := range ends {
		for _, m := range ordered[start:end] {
			waveOf[m.Name] = int32(w + 1)
		}
		start = end
	}
	return waveOf, int32(len(ends)), nil //nolint:gosec // at most len(rollout.waves)+1, which the API bounds at 7
}

// FailureBudget is how many of n Stacks may fail before a rollout halts:
// spec.rollout.failureBudget as a count, or as a percentage of n rounded
// down; 0 without one.
func FailureBudget(rollout *promotionv1alpha1.Rollout, n int) (int32, error) {
	if rollout == nil || rollout.FailureBudget == nil {
		return 0, nil
	}
	b, err := resolve(*rollout.FailureBudget, n, false)
	if err != nil {
		return 0, fmt.Errorf("spec.rollout.failureBudget: %w", err)
	}
	return int32(min(b, math.MaxInt32)), nil //nolint:gosec // clamped to the int32 range just before
}

// resolve reads a count or a percentage of n, rounded up or down.
func resolve(v intstr.IntOrString, n int, roundUp bool) (int, error) {
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return 0, fmt.Errorf("%d is below 0", v.IntVal)
		}
		return int(v.IntVal), nil
	}
	s := v.StrVal
	pct, isPct := strings.CutSuffix(s, "%")
	p, err := strconv.Atoi(pct)
	if err != nil || p < 0 || p > 100 {
		if !isPct {
			if c, err := strconv.Atoi(s); err == nil && c >= 0 {
				return c, nil
			}
		}
		return 0, fmt.Errorf("%q is neither a count nor a percentage from 0%% to 100%%", s)
	}
	if !isPct {
		return p, nil
	}
	if roundUp {
		return (p*n + 99) / 100, nil
	}
	return p * n / 100, nil
}

// Order sorts a stage's Stacks for its rollout: by name; by the value of
// order.label, then name, Stacks without it last; or by a hash of the
// seed (the stage's name when unset) and each name, so that the order is
// the same for the same seed, and a Stack joining the stage moves no
// other. It does not change members.
func Order(rollout *promotionv1alpha1.Rollout, stage string, members []RolloutMember) []RolloutMember {
	out := append([]RolloutMember(nil), members...)
	var order promotionv1alpha1.RolloutOrder
	if rollout != nil && rollout.Order != nil {
		order = *rollout.Order
	}
	switch order.By {
	case promotionv1alpha1.OrderByLabel:
		sort.SliceStable(out, func(i, j int) bool {
			a, aok := out[i].Labels[order.Label]
			b, bok := out[j].Labels[order.Label]
			switch {
			case aok != bok:
				return aok
			case aok && a != b:
				return labelLess(a, b)
			}
			return out[i].Name < out[j].Name
		})
	case promotionv1alpha1.OrderByRandom:
		seed := order.Seed
		if seed == "" {
			seed = stage
		}
		key := func(name string) uint64 {
			sum := sha256.Sum256([]byte(seed + "\x00" + name))
			return binary.BigEndian.Uint64(sum[:8])
		}
		sort.SliceStable(out, func(i, j int) bool {
			ki, kj := key(out[i].Name), key(out[j].Name)
			if ki != kj {
				return ki < kj
			}
			return out[i].Name < out[j].Name
		})
	default:
		sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	}
	return out
}

// labelLess compares label values as numbers when both are, as text
// otherwise.
func labelLess(a, b string) bool {
	x, errA := strconv.ParseFloat(a, 64)
	y, errB := strconv.ParseFloat(b, 64)
	if errA == nil && errB == nil && x != y {
		return x < y
	}
	return a < b
}
