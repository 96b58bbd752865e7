// Package migplan lists a GPU model's maximal MIG layouts (`colocd mig
// layouts`) and plans one inference service and one trainer on them
// without the GPU (`colocd mig plan`): it predicts the service and
// the trainer on every MIG instance profile, places them on each maximal
// layout, searches the highest MPS percentage of the whole GPU that holds
// the SLO, and says which is best. It sits above gpu (the profile tables)
// and predictor (the predictions), which must not know each other.
package migplan
