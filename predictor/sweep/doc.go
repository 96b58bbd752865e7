// Package sweep predicts an inference service's p99 at every step of one
// training job's MPS active-thread percentage (`colocd predict --sweep`),
// chooses the highest percentage within the SLO, as admission would, and
// draws the curve in a terminal or as an SVG chart.
package sweep
