// Package layering holds only a test: it keeps the repository's imports
// running one way, as ARCHITECTURE.md draws them ("Layers"), and each
// package inside core to the imports ARCHITECTURE.md lists for it ("Inside
// core"). It has no code to import.
package layering
