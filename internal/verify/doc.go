// Package verify is the measuring half of a stage's verification checks,
// free of any Kubernetes client: it takes one measurement of an HTTP
// endpoint (the request, the JSONPath selection of the answer, the CEL
// conditions over the selected `result`) and tells, from a check's counts,
// whether the check still runs, passed or failed. The Promotion controller
// (internal/controller/promotion) schedules the measurements, records them
// in the Promotion's status.verification and acts on the outcome.
//
// The field names and the counting follow Argo Rollouts' analysis (web
// metric provider), so that AnalysisTemplates port by copy and paste:
//
//   - a measurement is Successful when successCondition is true, Failed
//     when failureCondition is true or successCondition is false, and
//     Error when the endpoint could not be measured (transport error, a
//     status outside 2xx, an answer JSONPath cannot select from, a
//     condition that does not evaluate to a bool). Without any condition a
//     measurement that could be taken is Successful;
//   - a check fails as soon as more than failureLimit measurements failed,
//     and passes once count measurements were taken without that.
//
// Where stackyard differs from Argo: conditions are CEL, not expr; an
// Error counts as a failed measurement (there is no consecutiveErrorLimit);
// with both conditions set and neither true a measurement is Failed (Argo
// calls it Inconclusive, which stackyard has no limit for); and an answer
// that is not JSON is the string `result` when no jsonPath is set.
package verify
