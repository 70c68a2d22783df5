package cli

import (
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackyard/stackyard/internal/pipelinectl"
)

// kubeFlags are kubectl's connection flags: --kubeconfig, --context,
// -n/--namespace, --as and --as-group, read the way kubectl reads them
// (KUBECONFIG, the context's namespace).
type kubeFlags struct {
	kubeconfig, context, namespace string
	as                             string
	asGroups                       []string
}

// add registers the flags on fs.
func (k *kubeFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&k.context, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&k.namespace, "namespace", "n", "", "the namespace (default: the context's)")
	fs.StringVar(&k.as, "as", "", "act as this user, as kubectl's --as does (the API server checks that you may impersonate them)")
	fs.StringSliceVar(&k.asGroups, "as-group", nil, "with --as, act as a member of this group (repeat for several)")
}

// client connects as the flags say.
func (k *kubeFlags) client() (*pipelinectl.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.context}
	overrides.AuthInfo.Impersonate, overrides.AuthInfo.ImpersonateGroups = k.as, k.asGroups
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, err
	}
	ns := k.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, err
		}
	}
	return pipelinectl.New(cfg, ns)
}
