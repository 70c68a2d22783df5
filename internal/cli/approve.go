package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stackyard/stackyard/internal/pipelinectl"
)

func init() {
	subcommands = append(subcommands, approveCommand, rejectCommand)
}

// decideFlags are the flags of approve and reject.
type decideFlags struct {
	listFlags
	comment string
	yes     bool
	wave    int32
}

// approveCommand is `stackyard approve PROMOTION [-m comment]`.
func approveCommand() *cobra.Command {
	return decideCommand("approve PROMOTION",
		"Approve a promotion waiting for approval, or the wave of its rollout that waits (needs the verb approve on its stage)",
		"a comment, recorded with the approval", false)
}

// rejectCommand is `stackyard reject PROMOTION -m reason`.
func rejectCommand() *cobra.Command {
	return decideCommand("reject PROMOTION -m REASON",
		"Reject a promotion waiting for approval, which fails it, or the wave that waits, which aborts it (needs the verb approve on its stage)",
		"why (required), recorded with the rejection", true)
}

// decideCommand is approve, or reject, whose -m is required.
func decideCommand(use, short, usage string, reject bool) *cobra.Command {
	var f decideFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, pipelinectl.Decision{Promotion: args[0], Reject: reject, Comment: f.comment, Wave: f.wave})
		},
	}
	f.listFlags.add(cmd)
	cmd.Flags().StringVarP(&f.comment, "message", "m", "", usage)
	cmd.Flags().BoolVarP(&f.yes, "yes", "y", false, "do not show what the promotion would change, nor ask for confirmation on a terminal")
	cmd.Flags().Int32Var(&f.wave, "wave", 0, "the wave of a running rollout decided on; refused unless that wave waits for approval (default: whichever waits)")
	if reject {
		_ = cmd.MarkFlagRequired("message")
	}
	return cmd
}

// run records the decision and prints it.
func (f *decideFlags) run(cmd *cobra.Command, d pipelinectl.Decision) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	if !f.yes && f.output == "table" {
		verb := "Approve"
		if d.Reject {
			verb = "Reject"
		}
		digest, ok, err := confirm(cmd, c, d.Promotion, verb)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("promotion %s: not confirmed; nothing was recorded", d.Promotion)
		}
		d.PlanDigest = digest
	}
	a, err := c.Decide(cmd.Context(), d)
	if err != nil {
		return err
	}
	if f.output != "table" {
		return pipelinectl.PrintObject(cmd.OutOrStdout(), f.output, a)
	}
	verb := "approved"
	if d.Reject {
		verb = "rejected"
	}
	what := "promotion " + d.Promotion
	if a.Spec.Wave != 0 {
		what = fmt.Sprintf("wave %d of promotion %s", a.Spec.Wave, d.Promotion)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s by %s (approval %s, stage %s, plan %s)\n", what, verb, a.Spec.User, a.Name, a.Spec.Stage, a.Spec.PlanDigest)
	return nil
}
