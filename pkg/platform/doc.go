// Package platform is the runtime plumbing every runtimetruth service
// shares: configuration loading (config) and the component lifecycle
// (lifecycle).
package platform
