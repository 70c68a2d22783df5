package provider

import (
	"context"
	"os"
)

// StubbornEnv, set to "1" in the provider's environment, makes it behave
// like a real provider caught in a long cloud call: it keeps running when
// the engine that started it dies (it does not watch its parent), and a
// Sleep runs to its end even when the engine cancels it or goes away, or
// its custom timeout passes.
// Tests of stackyard's process cleanup set it, so that a provider
// outlives its engine unless stackyard ends it.
const StubbornEnv = "STACKYARD_TEST_PROVIDER_STUBBORN"

// stubborn reports whether StubbornEnv is set.
func stubborn() bool { return os.Getenv(StubbornEnv) == "1" }

// sleepContext is the context a Sleep waits under: ctx, or, for a
// stubborn provider, one that nothing cancels.
func sleepContext(ctx context.Context) context.Context {
	if stubborn() {
		return context.WithoutCancel(ctx)
	}
	return ctx
}
