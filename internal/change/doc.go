// Package change holds the rules of change management that the
// controllers, the CLI and the dashboard share, so that each is written
// once: which stage owns a Stack, the order of objects by age and of
// releases by commit, when a release is available to a stage and which one
// it promotes next, a stage's health from its Stacks, its promotion
// windows, and the names of the annotations and Secrets that carry a
// promotion's plan to a Stack. It imports no controller.
package change
