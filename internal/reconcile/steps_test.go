package reconcile

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestStepsRun(t *testing.T) {
	type ret struct {
		res Result
		err error
	}
	tests := []struct {
		name    string
		steps   []ret
		want    Result
		wantErr error
		wantRan int
	}{
		{name: "no steps", steps: nil, want: ResultEmpty, wantRan: 0},
		{name: "all empty", steps: []ret{{ResultEmpty, nil}, {ResultEmpty, nil}}, want: ResultEmpty, wantRan: 2},
		{name: "any success makes success", steps: []ret{{ResultEmpty, nil}, {ResultSuccess, nil}, {ResultEmpty, nil}}, want: ResultSuccess, wantRan: 3},
		{name: "requeue stops", steps: []ret{{ResultSuccess, nil}, {ResultRequeue, nil}, {ResultSuccess, nil}}, want: ResultRequeue, wantRan: 2},
		{name: "error stops", steps: []ret{{ResultSuccess, nil}, {ResultEmpty, errCause}, {ResultSuccess, nil}}, want: ResultEmpty, wantErr: errCause, wantRan: 2},
		{name: "error with success result still stops", steps: []ret{{ResultSuccess, errCause}, {ResultSuccess, nil}}, want: ResultSuccess, wantErr: errCause, wantRan: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran []string
			var steps Steps
			for i, r := range tt.steps {
				name := string(rune('a' + i))
				steps = append(steps, Step{Name: name, Run: func(context.Context) (Result, error) {
					ran = append(ran, name)
					return r.res, r.err
				}})
			}
			got, err := steps.Run(context.Background())
			if got != tt.want || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("Run() = %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
			}
			wantRan := []string{"a", "b", "c"}[:tt.wantRan]
			if !slices.Equal(ran, wantRan) {
				t.Errorf("ran %v, want %v", ran, wantRan)
			}
		})
	}
}
