package shared

import (
	"reflect"
	"testing"
)

func TestResourceRefConstructors(t *testing.T) {
	tests := []struct {
		name string
		got  ResourceRef
		want ResourceRef
	}{
		{"env", NewEnvResourceRef("HOME"),
			ResourceRef{SelectorType: ResourceSelectorEnv, ResourceSelector: ResourceSelector{Env: &EnvSelector{Name: "HOME"}}}},
		{"file", NewFileSystemResourceRef("/etc/token"),
			ResourceRef{SelectorType: ResourceSelectorFS, ResourceSelector: ResourceSelector{FileSystem: &FSSelector{Path: "/etc/token"}}}},
		{"secret", NewSecretResourceRef("git", "token"),
			ResourceRef{SelectorType: ResourceSelectorSecret, ResourceSelector: ResourceSelector{SecretRef: &SecretSelector{Name: "git", Key: "token"}}}},
		{"literal", NewLiteralResourceRef("x"),
			ResourceRef{SelectorType: ResourceSelectorLiteral, ResourceSelector: ResourceSelector{LiteralRef: &LiteralRef{Value: "x"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %+v, want %+v", tt.got, tt.want)
			}
		})
	}
}
