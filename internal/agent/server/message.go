package server

import (
	"os"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/ciutil"
)

// defaultMessage is the message the CLI records for an update that was
// given none (its update metadata): the title of the commit that the git
// repository holding dir is at; with no repository, or a commit without a
// message, the commit message PULUMI_GIT_COMMIT_MESSAGE or the CI system
// gives; otherwise none. The agent gives it to an update whose summary it
// builds from the run's events instead of reading the backend's history.
// Mercurial repositories, which the CLI reads too, are not read: their
// updates have no message.
func defaultMessage(dir string) string {
	msg := ""
	if repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true}); err == nil {
		if head, err := repo.Head(); err == nil {
			if c, err := repo.CommitObject(head.Hash()); err == nil {
				msg = strings.TrimSpace(c.Message)
			}
		}
	} else if m := os.Getenv("PULUMI_GIT_COMMIT_MESSAGE"); m != "" {
		msg = m
	}
	if msg == "" {
		msg = ciutil.DetectVars().CommitMessage
	}
	return commitTitle(msg)
}

// commitTitle is a commit message's first line.
func commitTitle(msg string) string {
	title, _, _ := strings.Cut(msg, "\n")
	title, _, _ = strings.Cut(title, "\r")
	return title
}
