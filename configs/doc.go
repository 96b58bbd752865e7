// Package configs holds colocd's configuration: for now the calibration
// presets shipped per GPU family (calibration/*.json), looked up by the GPU's
// name. The Config type, its loading and hot reload come with the sidecar.
package configs
