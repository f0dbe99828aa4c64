package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The README shows the two doors with this program: every Go block of its
// "two doors" section is this file's code, character for character, so
// the README cannot show code that does not compile or run.
func TestREADMEShowsThisCode(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "## Using peregrine from an application: two doors")
	if start < 0 {
		t.Fatal("README has no two-doors section")
	}
	section = section[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 2 {
		t.Fatalf("the two-doors section has %d Go blocks", len(blocks))
	}
	for _, b := range blocks {
		if !strings.Contains(string(src), b[1]) {
			t.Errorf("README block is not in examples/echo/main.go:\n%s", b[1])
		}
	}
}
