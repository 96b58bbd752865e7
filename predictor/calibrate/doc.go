// Package calibrate fits a GPU's model parameters from measurements of real
// co-location (colocd.measurements/v1): the time-slicing slice, switching
// overhead and hold-over by a Nelder–Mead search over simulations, and the
// MPS contention coefficients by non-negative least squares. Each fit
// reports its in-sample and cross-validated error in the calibration.
package calibrate
