package testenv

import "fmt"

// FileProject is a Pulumi YAML project named web that writes content to
// the file its Stack's config key web:path names, with the test provider:
// a test reads the file to see which commit a Stack runs. content is
// written into the program as is, so it may interpolate (${...}).
func FileProject(content string) string {
	return fmt.Sprintf(`name: web
runtime: yaml
config:
  path:
    type: string
resources:
  page:
    type: stackyardtest:index:File
    properties:
      path: ${path}
      content: %s
`, content)
}
