package config

import "github.com/peregrine-net/peregrine/app"

// Opts returns what Check read the stage into (tests).
func (s *Generator) Opts() app.GeneratorsOptions { return s.opts }
