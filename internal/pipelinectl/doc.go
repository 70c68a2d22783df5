// Package pipelinectl is what the `stackyard` commands for change
// management do against the API, as a person would with kubectl: read
// Pipelines, Stages, Releases and Promotions into rows, and ask for
// promotions and rollbacks by creating Promotion objects. The commands in
// internal/cli only parse flags and print; the operator's controllers do
// the promoting.
//
// Rows have stable JSON names: `-o json` is a contract, tested in
// output_test.go.
package pipelinectl
