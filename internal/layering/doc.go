// Package layering holds only a test: it keeps the repository's imports
// running one way, as ARCHITECTURE.md draws them. It has no code to import.
package layering
