package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/stackyard/stackyard/internal/pipelinectl"
)

func init() {
	subcommands = append(subcommands, pipelineCommand, promoteCommand, rollbackCommand, historyCommand, releasesCommand)
}

// listFlags are the flags of a command that prints rows.
type listFlags struct {
	kubeFlags
	output string
}

// add registers the flags on cmd.
func (l *listFlags) add(cmd *cobra.Command) {
	l.kubeFlags.add(cmd.Flags())
	cmd.Flags().StringVarP(&l.output, "output", "o", "table", "output format: table, json or yaml")
}

// pipelineCommand is `stackyard pipeline`, which groups pipeline views.
func pipelineCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Show pipelines of stages",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(pipelineStatusCommand())
	return cmd
}

// pipelineStatusCommand is `stackyard pipeline status [NAME]`.
func pipelineStatusCommand() *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:   "status [PIPELINE]",
		Short: "Show each stage's release, since when, its health and what it waits for",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			rows, err := c.PipelineStatus(cmd.Context(), firstArg(args))
			if err != nil {
				return err
			}
			return pipelinectl.Print(cmd.OutOrStdout(), f.output, "PipelineStatus", rows, pipelinectl.StageCells, pipelinectl.StageColumns, time.Now())
		},
	}
	f.add(cmd)
	return cmd
}

// releasesCommand is `stackyard releases PIPELINE`.
func releasesCommand() *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:   "releases PIPELINE",
		Short: "List a pipeline's releases, newest first, and where they run",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			rows, err := c.Releases(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return pipelinectl.Print(cmd.OutOrStdout(), f.output, "ReleaseList", rows, pipelinectl.ReleaseCells, pipelinectl.ReleaseColumns, time.Now())
		},
	}
	f.add(cmd)
	return cmd
}

// historyCommand is `stackyard history [STAGE]`.
func historyCommand() *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:   "history [STAGE]",
		Short: "Show the audit trail: releases discovered, promotions asked for, started and finished",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			rows, err := c.History(cmd.Context(), firstArg(args))
			if err != nil {
				return err
			}
			return pipelinectl.Print(cmd.OutOrStdout(), f.output, "History", rows, pipelinectl.HistoryCells, pipelinectl.HistoryColumns, time.Now())
		},
	}
	f.add(cmd)
	return cmd
}

// firstArg is args[0], or "".
func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
