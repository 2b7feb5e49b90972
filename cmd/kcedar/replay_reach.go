package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/tools/replay"
)

// replayReachOptions say which requests reach kcedar: the matchConditions
// of kcedar's webhook authorizer in the API server's
// AuthorizationConfiguration.
type replayReachOptions struct {
	// authorizationConfig is the --authorization-config file ("": what
	// kcedar manifests writes with its defaults).
	authorizationConfig string
	// authorizerName is kcedar's webhook authorizer's name in it.
	authorizerName string
}

// AddFlags registers --authorization-config and --authorizer-name.
func (o *replayReachOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.authorizationConfig, "authorization-config", "", "the API server's AuthorizationConfiguration (its --authorization-config file): requests its kcedar webhook's matchConditions exclude are left out (default: the one kcedar manifests writes)")
	f.StringVar(&o.authorizerName, "authorizer-name", "", "kcedar's webhook authorizer in --authorization-config (default: its only webhook authorizer)")
}

// reach evaluates the matchConditions of --authorization-config, or of the
// AuthorizationConfiguration kcedar manifests writes by default.
func (o *replayReachOptions) reach() (*replay.Reach, error) {
	if o.authorizationConfig == "" {
		data, err := defaultAuthorizationConfig()
		if err != nil {
			return nil, err
		}
		return replay.NewReach(data, "kcedar")
	}
	data, err := os.ReadFile(o.authorizationConfig)
	if err != nil {
		return nil, fmt.Errorf("--authorization-config: %w", err)
	}
	r, err := replay.NewReach(data, o.authorizerName)
	if err != nil {
		return nil, fmt.Errorf("--authorization-config %s: %w", o.authorizationConfig, err)
	}
	return r, nil
}

// defaultAuthorizationConfig is the AuthorizationConfiguration kcedar
// manifests writes with its default flags.
func defaultAuthorizationConfig() ([]byte, error) {
	mo := &manifestOptions{}
	mo.AddFlags(pflag.NewFlagSet("manifests", pflag.ContinueOnError))
	cfg, err := mo.authorizationConfig()
	if err != nil {
		return nil, err
	}
	return json.Marshal(cfg)
}
