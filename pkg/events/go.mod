module github.com/runtimetruth/runtimetruth/pkg/events

go 1.26.0

require (
	github.com/cloudevents/sdk-go/v2 v2.16.2
	github.com/go-json-experiment/json v1.27.2
	github.com/google/uuid v1.6.0
	github.com/nats-io/nats.go v1.55.0
	github.com/runtimetruth/runtimetruth/pkg/evidence v0.0.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/text v0.43.0
)

require (
	github.com/gowebpki/jcs v1.0.2 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/nats-io/nkeys v0.4.17 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/runtimetruth/runtimetruth/pkg/evidence => ../evidence
