package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackyard/stackyard/internal/pipelinectl"
)

// promoteFlags are the flags of promote and rollback.
type promoteFlags struct {
	listFlags
	reason  string
	wait    bool
	timeout time.Duration
}

// add registers the flags on cmd.
func (f *promoteFlags) add(cmd *cobra.Command) {
	f.listFlags.add(cmd)
	cmd.Flags().StringVar(&f.reason, "reason", "", "why, recorded in the promotion")
	cmd.Flags().BoolVar(&f.wait, "wait", false, "wait until the promotion has finished, and fail if it did not succeed")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Minute, "with --wait, how long to wait")
}

// promoteCommand is `stackyard promote STAGE [RELEASE]`.
func promoteCommand() *cobra.Command {
	var f promoteFlags
	cmd := &cobra.Command{
		Use:   "promote STAGE [RELEASE]",
		Short: "Ask for a release to be promoted into a stage (default: the one it would take next)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, pipelinectl.Request{Stage: args[0], Release: secondArg(args), Reason: f.reason})
		},
	}
	f.add(cmd)
	return cmd
}

// rollbackCommand is `stackyard rollback STAGE [RELEASE]`.
func rollbackCommand() *cobra.Command {
	var f promoteFlags
	cmd := &cobra.Command{
		Use:   "rollback STAGE [RELEASE]",
		Short: "Promote an earlier release verified in the stage (default: the newest one before the current)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, pipelinectl.Request{Stage: args[0], Release: secondArg(args), Rollback: true, Reason: f.reason})
		},
	}
	f.add(cmd)
	return cmd
}

// run creates the promotion, prints it and, with --wait, follows it.
func (f *promoteFlags) run(cmd *cobra.Command, req pipelinectl.Request) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	p, err := c.Promote(cmd.Context(), req)
	if err != nil {
		return err
	}
	if f.output == "table" {
		fmt.Fprintf(cmd.OutOrStdout(), "promotion %s created: release %s into stage %s\n", p.Name, p.Spec.Release, p.Spec.Stage)
	}
	if f.wait {
		ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
		defer cancel()
		if p, err = c.Wait(ctx, p, time.Second); err != nil {
			return err
		}
		if f.output == "table" {
			fmt.Fprintf(cmd.OutOrStdout(), "promotion %s %s: %s\n", p.Name, p.Status.Phase, p.Status.Message)
		}
	}
	if f.output != "table" {
		if err := pipelinectl.PrintObject(cmd.OutOrStdout(), f.output, p); err != nil {
			return err
		}
	}
	if f.wait && p.Status.Phase != "Succeeded" {
		return fmt.Errorf("promotion %s ended %s", p.Name, p.Status.Phase)
	}
	return nil
}

// secondArg is args[1], or "".
func secondArg(args []string) string {
	if len(args) < 2 {
		return ""
	}
	return args[1]
}
