package cli

import (
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackyard/stackyard/internal/pipelinectl"
)

// kubeFlags are kubectl's connection flags: --kubeconfig, --context and
// -n/--namespace, read the way kubectl reads them (KUBECONFIG, the
// context's namespace).
type kubeFlags struct {
	kubeconfig, context, namespace string
}

// add registers the flags on fs.
func (k *kubeFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&k.context, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&k.namespace, "namespace", "n", "", "the namespace (default: the context's)")
}

// client connects as the flags say.
func (k *kubeFlags) client() (*pipelinectl.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context})
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
