// Package migplan plans one inference service and one trainer on a GPU
// model without the GPU (`colocd mig plan`): it predicts the service and
// the trainer on every MIG instance profile, places them on each maximal
// layout, searches the highest MPS percentage of the whole GPU that holds
// the SLO, and says which is best. It sits above gpu (the profile tables)
// and predictor (the predictions), which must not know each other.
package migplan
