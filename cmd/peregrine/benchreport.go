package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
			ratios, points := benchreport.Parse(bytes.NewReader(buf.Bytes())), benchreport.ParseSeries(bytes.NewReader(buf.Bytes()))
			if len(ratios)+len(points) == 0 {
				return fmt.Errorf("--report %s: the scenario printed no RATIO or SERIES line to report", dir)
			}
			path, err := benchreport.WriteMarkdown(dir, cmd.Name(), ratios, points, time.Now())
			if err != nil {
				return fmt.Errorf("--report %s: %w", dir, err)
			}
			fmt.Fprintf(out, "report: %s (%d ratios, a plot each; %d figures)\n", path, len(ratios), len(benchreport.Figures(points)))
			return nil
		}
	}
	bench.AddCommand(newBenchRenderCommand(&dir))
}

// newBenchRenderCommand is bench render: a report from a scenario's saved
// output (RATIO lines), e.g. a run recorded in bench/RESULTS.md.
func newBenchRenderCommand(dir *string) *cobra.Command {
	var scenario string
	cmd := &cobra.Command{
		Use:   "render FILE --report DIR",
		Short: "Write the --report of a scenario's saved output (its RATIO lines) without running it",
		Example: `  peregrine bench transport-core | tee tc.txt
  peregrine bench render tc.txt --scenario transport-core --report bench/reports/transport-core`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error {
			if *dir == "" {
				return usage(fmt.Errorf("--report DIR is required: the directory to write the report to"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return usage(err)
			}
			ratios, points := benchreport.Parse(bytes.NewReader(data)), benchreport.ParseSeries(bytes.NewReader(data))
			if len(ratios)+len(points) == 0 {
				return usage(fmt.Errorf("%s holds no RATIO or SERIES line (save a scenario's output: peregrine bench SCENARIO > FILE)", args[0]))
			}
			if scenario == "" {
				scenario = filepath.Base(args[0])
			}
			st, _ := os.Stat(args[0])
			path, err := benchreport.WriteMarkdown(*dir, scenario, ratios, points, st.ModTime())
			if err != nil {
				return fmt.Errorf("--report %s: %w", *dir, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report: %s (%d ratios, a plot each; %d figures)\n", path, len(ratios), len(benchreport.Figures(points)))
			return nil
		},
	}
	cmd.Flags().StringVar(&scenario, "scenario", "", "the scenario's name in the report's title (default: the file's name)")
	return cmd
}
