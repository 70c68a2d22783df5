package workspace

import (
	"testing"
	"time"
)

func TestWarmFor(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	idle := time.Minute
	for _, tt := range []struct {
		name string
		u    usage
		want time.Duration
	}{
		{"never used", usage{}, idle},
		{"used once", usage{lastUsed: at}, idle},
		{"updates close together", usage{prevUsed: at.Add(-10 * time.Second), lastUsed: at}, idle},
		{"an update every 4 minutes", usage{prevUsed: at.Add(-4 * time.Minute), lastUsed: at}, 6 * time.Minute},
		{"an update every 6 minutes", usage{prevUsed: at.Add(-6 * time.Minute), lastUsed: at}, 9 * time.Minute},
		{"updates hours apart", usage{prevUsed: at.Add(-3 * time.Hour), lastUsed: at}, idle},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := warmFor(idle, tt.u); got != tt.want {
				t.Fatalf("warmFor = %s, want %s", got, tt.want)
			}
		})
	}
}
