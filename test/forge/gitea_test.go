package forge_test

import (
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackyard/stackyard/test/forge"
	"github.com/stackyard/stackyard/test/gitserver"
)

// TestGitea starts Gitea, pushes a commit to a new repository over HTTP
// and reads it back through the API, with a commit status set.
func TestGitea(t *testing.T) {
	g := NewWithT(t)
	gitea := forge.StartGitea(t)
	clone := gitea.CreateRepo("web")
	g.Expect(clone).To(Equal(gitea.URL + "/" + forge.Owner + "/web.git"))
	local := gitserver.New(t).CreateRepo("web")
	sha := local.Commit("main", map[string]string{"README": "hello"})
	local.Git("push", gitea.PushURL("web"), "main")

	gitea.WaitBranch("web", "main", sha)
	g.Expect(gitea.Call(http.MethodPost, "/api/v1/repos/"+forge.Owner+"/web/statuses/"+sha,
		map[string]string{"state": "success", "context": "test"}, nil)).To(Succeed())
	statuses, err := gitea.Statuses("web", sha)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statuses).To(ConsistOf(HaveField("Context", "test")))
}
