package reconcile

import (
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Result is what a reconcile step reports besides its error: whether it did
// its part and whether the object must be looked at again soon.
type Result int

const (
	// ResultEmpty means the step had nothing to say; it neither asks for a
	// requeue nor claims success (e.g. a step that only checked something).
	ResultEmpty Result = iota
	// ResultRequeue asks for the object to be reconciled again soon, e.g.
	// after adding a finalizer or while an update is running; the chain of
	// steps stops here.
	ResultRequeue
	// ResultSuccess means the step completed its work.
	ResultSuccess
)

// String returns the result's name, for logs.
func (r Result) String() string {
	switch r {
	case ResultEmpty:
		return "Empty"
	case ResultRequeue:
		return "Requeue"
	case ResultSuccess:
		return "Success"
	default:
		return "Unknown"
	}
}

// DefaultRequeueAfter is how soon a ResultRequeue comes back when the
// Schedule does not say.
const DefaultRequeueAfter = time.Second

// Schedule says when an object is looked at again, as ComputeResult reads
// it. The zero value polls never, requeues after DefaultRequeueAfter and
// jitters by DefaultJitterFraction.
type Schedule struct {
	// Interval is how often a successfully reconciled object is looked at
	// again (e.g. to poll a branch for new commits); zero means only when
	// a watch event arrives.
	Interval time.Duration
	// RequeueAfter is how soon a ResultRequeue comes back; zero means
	// DefaultRequeueAfter.
	RequeueAfter time.Duration
	// JitterFraction moves Interval by up to ±JitterFraction; zero means
	// DefaultJitterFraction, negative means no jitter.
	JitterFraction float64
	// Rand is the jitter's random source, returning a number in [0, 1);
	// nil means math/rand/v2. Tests set it.
	Rand func() float64
	// Pacer, when set, stretches a Waiting error's interval so that the
	// controller's waiting objects come back at its rate together; Object
	// is the reconciled object's key, which it counts.
	Pacer  *Pacer
	Object types.NamespacedName
}

// ComputeResult maps a reconcile's outcome to what Reconcile returns to
// controller-runtime. It is the one place these decisions are made:
//
//   - Stalling: no error; the Stalled condition and a Warning event tell
//     the human, and a change to the object restarts. No requeue, unless
//     the stall asks to be looked at again after its RequeueAfter.
//   - Waiting: no error, requeue after the error's fixed interval (no
//     backoff), stretched by the Schedule's Pacer when many wait at once.
//   - Generic or any other error: the error itself, so controller-runtime
//     logs it and retries with its exponential backoff.
//   - Ignore, ResultSuccess: requeue after the jittered Interval (or not at
//     all when Interval is zero).
//   - ResultRequeue: requeue after Schedule.RequeueAfter.
//   - ResultEmpty: nothing.
func ComputeResult(res Result, err error, s Schedule) (ctrl.Result, error) {
	var t typed
	errors.As(err, &t) // t stays nil for no error or an untyped one
	if _, waits := t.(*Waiting); !waits {
		s.Pacer.Done(s.Object)
	}
	if err != nil {
		switch e := t.(type) {
		case *Stalling:
			return ctrl.Result{RequeueAfter: max(e.RequeueAfter, 0)}, nil
		case *Waiting:
			return ctrl.Result{RequeueAfter: s.Pacer.Wait(s.Object, e.Interval())}, nil
		case *Ignore:
			res = ResultSuccess
		default:
			return ctrl.Result{}, err
		}
	}
	switch res {
	case ResultRequeue:
		if s.RequeueAfter > 0 {
			return ctrl.Result{RequeueAfter: s.RequeueAfter}, nil
		}
		return ctrl.Result{RequeueAfter: DefaultRequeueAfter}, nil
	case ResultSuccess:
		return ctrl.Result{RequeueAfter: s.next()}, nil
	default:
		return ctrl.Result{}, nil
	}
}

// next returns the jittered polling interval, or zero when there is none.
func (s Schedule) next() time.Duration {
	if s.Interval <= 0 {
		return 0
	}
	rnd := s.Rand
	if rnd == nil {
		return Jitter(s.Interval, s.JitterFraction)
	}
	return JitterWith(rnd, s.Interval, s.JitterFraction)
}
