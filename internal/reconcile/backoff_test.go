package reconcile

import (
	"math"
	"testing"
	"time"
)

func TestFailureCooldown(t *testing.T) {
	tests := []struct {
		name       string
		failures   int64
		maxSeconds int64
		want       time.Duration
	}{
		{name: "no failures", failures: 0, want: 10 * time.Second},
		{name: "negative failures", failures: -3, want: 10 * time.Second},
		{name: "1", failures: 1, want: 30 * time.Second},
		{name: "2", failures: 2, want: 90 * time.Second},
		{name: "3", failures: 3, want: 270 * time.Second},
		{name: "5", failures: 5, want: 2430 * time.Second},
		{name: "8", failures: 8, want: 65610 * time.Second},
		{name: "9 reaches the default cap", failures: 9, want: 24 * time.Hour},
		{name: "huge count", failures: math.MaxInt64, want: 24 * time.Hour},
		{name: "cap 300s below it", failures: 3, maxSeconds: 300, want: 270 * time.Second},
		{name: "cap 300s reached", failures: 4, maxSeconds: 300, want: 300 * time.Second},
		{name: "cap 300s, 10 failures", failures: 10, maxSeconds: 300, want: 300 * time.Second},
		{name: "cap below the base", failures: 0, maxSeconds: 5, want: 5 * time.Second},
		{name: "cap above a day, below it", failures: 10, maxSeconds: 7 * 86400, want: 590490 * time.Second},
		{name: "cap above a day, reached", failures: 11, maxSeconds: 7 * 86400, want: 7 * 24 * time.Hour},
		{name: "cap negative means default", failures: 20, maxSeconds: -1, want: 24 * time.Hour},
		{name: "cap overflowing a duration", failures: math.MaxInt64, maxSeconds: math.MaxInt64, want: time.Duration(math.MaxInt64)},
		{name: "cap overflowing, few failures", failures: 2, maxSeconds: math.MaxInt64, want: 90 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FailureCooldown(tt.failures, tt.maxSeconds); got != tt.want {
				t.Errorf("FailureCooldown(%d, %d) = %v, want %v", tt.failures, tt.maxSeconds, got, tt.want)
			}
		})
	}
}

func TestJitterWith(t *testing.T) {
	tests := []struct {
		name     string
		d        time.Duration
		fraction float64
		r        float64
		want     time.Duration
	}{
		{name: "lowest", d: 100 * time.Second, fraction: 0.05, r: 0, want: 95 * time.Second},
		{name: "middle", d: 100 * time.Second, fraction: 0.05, r: 0.5, want: 100 * time.Second},
		{name: "three quarters", d: 100 * time.Second, fraction: 0.05, r: 0.75, want: 102500 * time.Millisecond},
		{name: "default fraction", d: 100 * time.Second, fraction: 0, r: 0, want: 95 * time.Second},
		{name: "ten percent", d: time.Minute, fraction: 0.1, r: 0.25, want: 57 * time.Second},
		{name: "negative fraction: none", d: time.Minute, fraction: -1, r: 0, want: time.Minute},
		{name: "fraction above one: never negative", d: time.Minute, fraction: 5, r: 0, want: 0},
		{name: "zero duration", d: 0, fraction: 0.05, r: 0, want: 0},
		{name: "negative duration unchanged", d: -time.Second, fraction: 0.05, r: 0, want: -time.Second},
		{name: "source out of range is clamped", d: 100 * time.Second, fraction: 0.05, r: 7, want: 105 * time.Second},
		{name: "no overflow at the top", d: time.Duration(math.MaxInt64), fraction: 0.05, r: 0.99, want: time.Duration(math.MaxInt64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := JitterWith(fixedRand(tt.r), tt.d, tt.fraction); got != tt.want {
				t.Errorf("JitterWith(%v, %v, %v) = %v, want %v", tt.r, tt.d, tt.fraction, got, tt.want)
			}
		})
	}
}

func TestJitterStaysInBounds(t *testing.T) {
	for range 200 {
		if got := Jitter(time.Hour, 0.05); got < 57*time.Minute || got > 63*time.Minute {
			t.Fatalf("Jitter(1h, 5%%) = %v, outside 57m..63m", got)
		}
	}
}

func TestSeconds(t *testing.T) {
	tests := []struct {
		name string
		in   int64
		want time.Duration
	}{
		{name: "zero", in: 0, want: 0},
		{name: "negative", in: -5, want: 0},
		{name: "minute", in: 60, want: time.Minute},
		{name: "largest exact", in: int64(math.MaxInt64 / int64(time.Second)), want: time.Duration(math.MaxInt64/int64(time.Second)) * time.Second},
		{name: "overflow saturates", in: math.MaxInt64, want: time.Duration(math.MaxInt64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Seconds(tt.in); got != tt.want {
				t.Errorf("Seconds(%d) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestInterval(t *testing.T) {
	tests := []struct {
		name       string
		seconds    int64
		def, floor time.Duration
		want       time.Duration
	}{
		{name: "unset uses default", seconds: 0, def: 60 * time.Second, floor: 60 * time.Second, want: time.Minute},
		{name: "below floor", seconds: 30, def: 60 * time.Second, floor: 60 * time.Second, want: time.Minute},
		{name: "above floor", seconds: 300, def: 60 * time.Second, floor: 60 * time.Second, want: 5 * time.Minute},
		{name: "negative uses default", seconds: -1, def: 10 * time.Minute, floor: 0, want: 10 * time.Minute},
		{name: "default below floor", seconds: 0, def: 0, floor: time.Second, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Interval(tt.seconds, tt.def, tt.floor); got != tt.want {
				t.Errorf("Interval(%d, %v, %v) = %v, want %v", tt.seconds, tt.def, tt.floor, got, tt.want)
			}
		})
	}
}

func TestRemaining(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		since time.Time
		wait  time.Duration
		want  time.Duration
	}{
		{name: "just started", since: now, wait: time.Minute, want: time.Minute},
		{name: "partway", since: now.Add(-20 * time.Second), wait: time.Minute, want: 40 * time.Second},
		{name: "over", since: now.Add(-2 * time.Minute), wait: time.Minute, want: 0},
		{name: "since in the future", since: now.Add(time.Hour), wait: time.Minute, want: time.Minute},
		{name: "zero time", since: time.Time{}, wait: time.Minute, want: 0},
		{name: "negative wait", since: now, wait: -time.Minute, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Remaining(tt.since, tt.wait, now); got != tt.want {
				t.Errorf("Remaining = %v, want %v", got, tt.want)
			}
		})
	}
}
