package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/stackyard/stackyard/internal/pipelinectl"
)

func init() {
	subcommands = append(subcommands, reviewCommand)
}

// reviewFlags are the flags of review.
type reviewFlags struct {
	listFlags
	patch bool
}

// reviewCommand is `stackyard review PROMOTION`.
func reviewCommand() *cobra.Command {
	var f reviewFlags
	cmd := &cobra.Command{
		Use:   "review PROMOTION",
		Short: "Show what a promotion would change: each resource's values (secrets masked), the commits and files the release brings, the policy rules that fired",
		Long: `Show what an approver decides on: for each Stack of the promotion's
stage, the resources its preview would change with each changed value
(old => new; secrets as [secret]), the commits between what the Stack runs
and the release, the files changed under its repoDir and, with --patch,
their unified diff. Values and the diff are read from the promotion's plan
Secrets, which needs the right to get Secrets in the namespace; without
it, the property names are shown.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			r, err := c.Review(cmd.Context(), args[0], f.patch || f.output != "table")
			if err != nil {
				return err
			}
			if f.output != "table" {
				return pipelinectl.PrintObject(cmd.OutOrStdout(), f.output, r)
			}
			return pipelinectl.WriteReview(cmd.OutOrStdout(), r)
		},
	}
	f.listFlags.add(cmd)
	cmd.Flags().BoolVar(&f.patch, "patch", false, "print the unified diff of the code too")
	return cmd
}

// stdinIsTerminal reports whether the command's input is a terminal, where
// approve asks for confirmation; a variable, so that tests can say yes.
var stdinIsTerminal = func(in io.Reader) bool {
	f, ok := in.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// confirm shows the review of the promotion and, on a terminal, asks
// whether to go on. It returns the plan digest shown, which the decision
// is then held to, and ok false when the answer is not yes.
func confirm(cmd *cobra.Command, c *pipelinectl.Client, promotion, verb string) (digest string, ok bool, err error) {
	r, err := c.Review(cmd.Context(), promotion, false)
	if err != nil {
		return "", false, err
	}
	out := cmd.OutOrStdout()
	if err := pipelinectl.WriteReview(out, r); err != nil {
		return "", false, err
	}
	if !stdinIsTerminal(cmd.InOrStdin()) {
		return r.PlanDigest, true, nil
	}
	fmt.Fprintf(out, "\n%s promotion %s (plan %s)? [y/N] ", verb, promotion, r.PlanDigest)
	answer, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", false, err
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return r.PlanDigest, true, nil
	}
	return "", false, nil
}
