package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/pipelinectl"
)

func init() {
	subcommands = append(subcommands, haltCommand, resumeCommand, abortCommand)
}

// haltCommand is `stackyard halt PROMOTION [-m reason]`.
func haltCommand() *cobra.Command {
	return interveneCommand(promotionv1alpha1.Halt, "halt PROMOTION",
		"Halt a promotion's rollout: it pins no more Stacks until resumed (needs the verb operate on its stage)")
}

// resumeCommand is `stackyard resume PROMOTION [-m reason]`.
func resumeCommand() *cobra.Command {
	return interveneCommand(promotionv1alpha1.Resume, "resume PROMOTION",
		"Resume a halted rollout (needs the verb operate on its stage)")
}

// abortCommand is `stackyard abort PROMOTION [-m reason]`.
func abortCommand() *cobra.Command {
	return interveneCommand(promotionv1alpha1.Abort, "abort PROMOTION",
		"Abort a promotion that runs: no more Stacks are pinned, and it ends once those updating finish (needs the verb operate on its stage)")
}

// interveneCommand records an Intervention of action on a promotion.
func interveneCommand(action promotionv1alpha1.InterventionAction, use, short string) *cobra.Command {
	var (
		f      listFlags
		reason string
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			in, err := c.Intervene(cmd.Context(), args[0], action, reason)
			if err != nil {
				return err
			}
			if f.output != "table" {
				return pipelinectl.PrintObject(cmd.OutOrStdout(), f.output, in)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "promotion %s: %s asked by %s (intervention %s, stage %s)\n",
				in.Spec.Promotion, action, in.Spec.User, in.Name, in.Spec.Stage)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVarP(&reason, "message", "m", "", "why, recorded with the intervention")
	return cmd
}
