module github.com/runtimetruth/runtimetruth/services/collector

go 1.26.0

require (
	github.com/prometheus/procfs v0.23.0
	github.com/runtimetruth/runtimetruth/pkg/evidence v0.0.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/gowebpki/jcs v1.0.2 // indirect
	github.com/runtimetruth/runtimetruth/pkg/events v0.0.0
	github.com/runtimetruth/runtimetruth/pkg/platform v0.0.0
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.58.0 // indirect
)

replace github.com/runtimetruth/runtimetruth/pkg/evidence => ../../pkg/evidence

replace github.com/runtimetruth/runtimetruth/pkg/platform => ../../pkg/platform

replace github.com/runtimetruth/runtimetruth/pkg/events => ../../pkg/events
