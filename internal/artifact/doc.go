// Package artifact is the operator's artifact store and the HTTP server in
// front of it.
//
// Controllers that turn an object into a program source (the Program
// controller renders a Pulumi YAML project) pack it as a tar.gz with Pack,
// store it with Store.Put and publish the returned artifact in the object's
// status; workspaces then download it over HTTP and check its digest, the
// same way they fetch a Flux source's artifact.
//
// Layout: an artifact of revision R of the object (kind, namespace, name)
// lives at <root>/<kind>/<namespace>/<name>/<R>.tar.gz, and the Server
// serves that file at <base URL>/<kind>/<namespace>/<name>/<R>.tar.gz. The
// base URL is the address workspaces reach the server by (in a cluster the
// Service's DNS name), which need not be the address it listens on.
//
// Writes are atomic (a temporary file renamed into place), every file
// access goes through an os.Root so no name can leave the storage
// directory, and all methods are safe for concurrent use.
package artifact
