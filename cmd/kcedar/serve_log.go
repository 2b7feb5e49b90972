package main

import (
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/server"
)

// decisionLogOptions are serve's --decision-log flags.
type decisionLogOptions struct {
	path         string
	sampleAllows int
	perSecond    float64
}

func (o *decisionLogOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.path, "decision-log", "", "write one JSON line per authorization decision to this file (\"-\": stdout): every deny, conditional and erroring decision, a sample of allows")
	f.IntVar(&o.sampleAllows, "decision-log-sample-allows", 100, "log one in N allows and no-opinions (1: all)")
	f.Float64Var(&o.perSecond, "decision-log-rate", 200, "at most this many decision log lines a second (drops are counted in the next line)")
}

// open returns the decision log, or nil without --decision-log.
func (o *decisionLogOptions) open() (*server.DecisionLog, io.Closer, error) {
	if o.path == "" {
		return nil, nil, nil
	}
	// The lines quote requests (users, names): encoding/json escapes their
	// C0 controls, the JSONWriter the rest a terminal acts on (C1,
	// U+202E...), for the log read with tail or on stdout.
	if o.path == "-" {
		return server.NewDecisionLog(safetext.NewJSONWriter(os.Stdout), o.sampleAllows, o.perSecond, int(o.perSecond)+1), nil, nil
	}
	f, err := os.OpenFile(o.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	return server.NewDecisionLog(safetext.NewJSONWriter(f), o.sampleAllows, o.perSecond, int(o.perSecond)+1), f, nil
}
