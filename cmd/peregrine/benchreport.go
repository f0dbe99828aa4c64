package main

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	benchreport "github.com/peregrine-net/peregrine/bench/report"
)

// addReportFlag gives bench --report DIR: every scenario's output is also
// read back into a Markdown report with a PNG plot per ratio in DIR
// (bench/benchreport.WriteMarkdown). It wraps the scenarios registered so far.
func addReportFlag(bench *cobra.Command) {
	var dir string
	bench.PersistentFlags().StringVar(&dir, "report", "", "also write a Markdown report with a PNG plot of each ratio (peregrine beside its baseline from the same run) to this directory")
	for _, sc := range bench.Commands() {
		run := sc.RunE
		if run == nil {
			continue
		}
		sc.RunE = func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return run(cmd, args)
			}
			out := cmd.OutOrStdout()
			var buf bytes.Buffer
			cmd.SetOut(io.MultiWriter(out, &buf))
			err := run(cmd, args)
			cmd.SetOut(out)
			if err != nil {
				return err
			}
			ratios := benchreport.Parse(&buf)
			if len(ratios) == 0 {
				return fmt.Errorf("--report %s: the scenario printed no RATIO line to report", dir)
			}
			path, err := benchreport.WriteMarkdown(dir, cmd.Name(), ratios, time.Now())
			if err != nil {
				return fmt.Errorf("--report %s: %w", dir, err)
			}
			fmt.Fprintf(out, "report: %s (%d ratios, a plot each)\n", path, len(ratios))
			return nil
		}
	}
}
