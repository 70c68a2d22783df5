// Package kubeprogram is the real-world program the programs suite and
// make test-cluster deploy: Pulumi YAML on Pulumi's Kubernetes provider,
// making a Namespace, a ConfigMap and a Deployment.
package kubeprogram

import "fmt"

// TemplateAnnotation is the Deployment's pod template annotation that
// carries the greeting, so that a new greeting rolls the Deployment.
const TemplateAnnotation = "stackyard.dev/greeting"

// Project is the program's Pulumi.yaml, greeting its ConfigMap's and pod
// template's greeting. The ConfigMap is named by Pulumi (settings-<suffix>),
// so a new greeting replaces it create-before-delete and rolls the
// Deployment, whose pods read it, onto the new one: the provider's way
// with ConfigMaps. skipAwait skips the provider's waits for its objects
// (pulumi.com/skipAwait) and deletes them in the background, for an API
// server that runs no controllers (no garbage collector to finish a
// foreground deletion). Its stack configuration:
//
//   - web:namespace (required): the Namespace it creates;
//   - web:image: the Deployment's image (default the pause image), pulled
//     only if not present.
//
// It outputs the namespace, the ConfigMap's and the Deployment's names.
func Project(greeting string, skipAwait bool) string {
	return ProjectAt(greeting, skipAwait, "")
}

// ProjectAt is Project with every resource asking for version of the
// provider (its version resource option), which the engine then installs
// if it is not installed: the version a plugin mirror serves. An empty
// version leaves the engine to pick.
func ProjectAt(greeting string, skipAwait bool, version string) string {
	options := "{}"
	if version != "" {
		options = fmt.Sprintf("{version: %q}", version)
	}
	annotations := "{}"
	if skipAwait {
		annotations = `{pulumi.com/skipAwait: "true", pulumi.com/deletionPropagationPolicy: background}`
	}
	return fmt.Sprintf(`name: web
runtime: yaml
description: a Namespace, a ConfigMap and a Deployment, on Pulumi's Kubernetes provider
config:
  namespace:
    type: string
  image:
    type: string
    default: registry.k8s.io/pause:3.10
resources:
  ns:
    type: kubernetes:core/v1:Namespace
    options: %[4]s
    properties:
      metadata:
        name: ${namespace}
        annotations: %[3]s
  settings:
    type: kubernetes:core/v1:ConfigMap
    options: %[4]s
    properties:
      metadata:
        namespace: ${ns.metadata.name}
        annotations: %[3]s
      data:
        greeting: %[1]q
  web:
    type: kubernetes:apps/v1:Deployment
    options: %[4]s
    properties:
      metadata:
        name: web
        namespace: ${ns.metadata.name}
        annotations: %[3]s
      spec:
        replicas: 1
        selector:
          matchLabels:
            app: web
        template:
          metadata:
            labels:
              app: web
            annotations:
              %[2]s: %[1]q
          spec:
            automountServiceAccountToken: false
            securityContext:
              runAsNonRoot: true
              runAsUser: 65532
              seccompProfile:
                type: RuntimeDefault
            containers:
              - name: web
                image: ${image}
                imagePullPolicy: IfNotPresent
                securityContext:
                  allowPrivilegeEscalation: false
                  capabilities:
                    drop: [ALL]
                envFrom:
                  - configMapRef:
                      name: ${settings.metadata.name}
outputs:
  namespace: ${ns.metadata.name}
  configMap: ${settings.metadata.name}
  deployment: ${web.metadata.name}
`, greeting, TemplateAnnotation, annotations, options)
}
