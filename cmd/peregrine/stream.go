package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
)

// Streamed results (--format jsonl|csv): every record — an interval, a
// trial, the summary — is one line on stdout carrying the test's
// parameters, as iperf3 -J and TRex do, so a line read on its own says
// what was measured. The text output goes to stderr meanwhile.

// Formats --format takes.
const (
	formatText  = "text"
	formatJSONL = "jsonl"
	formatCSV   = "csv"
)

// checkFormat checks --format.
func checkFormat(f string) error {
	switch f {
	case formatText, formatJSONL, formatCSV:
		return nil
	}
	return fmt.Errorf("--format %q: give text, jsonl (one JSON object per line) or csv", f)
}

// streamed reports whether format streams records (not text).
func streamed(format string) bool { return format == formatJSONL || format == formatCSV }

// recordStream writes records as JSON lines or CSV rows. A JSON line is
// {"type": ..., "params": {...}, FIELD: VALUE...}; a CSV row has the
// columns type, the fields named at creation, then one param_NAME column
// per parameter (sorted), under a header written once.
type recordStream struct {
	format    string
	w         io.Writer
	csv       *csv.Writer
	params    map[string]any
	paramKeys []string
	cols      []string
	header    bool
}

// newRecordStream returns nil for the text format: a nil stream writes
// nothing.
func newRecordStream(format string, w io.Writer, params map[string]any, cols ...string) *recordStream {
	if !streamed(format) {
		return nil
	}
	return &recordStream{format: format, w: w, csv: csv.NewWriter(w), params: params,
		paramKeys: slices.Sorted(maps.Keys(params)), cols: cols}
}

// write writes one record of type typ; fields outside the stream's
// columns appear in JSON only.
func (s *recordStream) write(typ string, fields map[string]any) error {
	if s == nil {
		return nil
	}
	if s.format == formatJSONL {
		rec := make(map[string]any, len(fields)+2)
		maps.Copy(rec, fields)
		rec["type"], rec["params"] = typ, s.params
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		_, err = s.w.Write(append(b, '\n'))
		return err
	}
	if !s.header {
		s.header = true
		head := append([]string{"type"}, s.cols...)
		for _, k := range s.paramKeys {
			head = append(head, "param_"+k)
		}
		if err := s.csv.Write(head); err != nil {
			return err
		}
	}
	row := []string{typ}
	for _, c := range s.cols {
		row = append(row, csvValue(fields[c]))
	}
	for _, k := range s.paramKeys {
		row = append(row, csvValue(s.params[k]))
	}
	if err := s.csv.Write(row); err != nil {
		return err
	}
	s.csv.Flush()
	return s.csv.Error()
}

// csvValue formats one cell: empty for a field the record lacks, floats
// in their shortest exact form.
func csvValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return x
	}
	return fmt.Sprint(v)
}
