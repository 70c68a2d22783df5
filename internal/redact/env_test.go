package redact

import (
	"reflect"
	"testing"
)

func TestSecretEnv(t *testing.T) {
	if got := EncodeSecretEnv([]string{"B", "A", "", "B", "bad,name"}); got != "A,B" {
		t.Errorf("EncodeSecretEnv = %q", got)
	}
	env := map[string]string{SecretEnvVar: "TOKEN, EMPTY,MISSING,PASSWORD", "TOKEN": "t0k", "PASSWORD": "hunter2", "EMPTY": ""}
	got := SecretEnvValues(func(k string) string { return env[k] })
	if want := []string{"t0k", "hunter2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("SecretEnvValues = %q, want %q", got, want)
	}
	if got := SecretEnvValues(func(string) string { return "" }); got != nil {
		t.Errorf("without the variable: %q", got)
	}
}
