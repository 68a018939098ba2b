module github.com/runtimetruth/runtimetruth/cmd/runtimetruth

go 1.26.0

require (
	github.com/runtimetruth/runtimetruth/pkg/evidence v0.0.0
	github.com/runtimetruth/runtimetruth/services/collector v0.0.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/runtimetruth/runtimetruth/pkg/events v0.0.0
	github.com/runtimetruth/runtimetruth/pkg/platform v0.0.0
	github.com/runtimetruth/runtimetruth/services/verifier v0.0.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	golang.org/x/text v0.14.0 // indirect
)

replace github.com/runtimetruth/runtimetruth/pkg/evidence => ../../pkg/evidence

replace github.com/runtimetruth/runtimetruth/services/collector => ../../services/collector

replace github.com/runtimetruth/runtimetruth/pkg/events => ../../pkg/events

replace github.com/runtimetruth/runtimetruth/pkg/platform => ../../pkg/platform

replace github.com/runtimetruth/runtimetruth/services/verifier => ../../services/verifier
