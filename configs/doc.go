// Package configs holds colocd's configuration: the Config type and its
// defaults, Load (defaults, then one YAML file, then COLOCD_* environment
// variables, then flag values, each winning over the one before), Validate
// (every problem at once, each naming its key), the Watcher that hot-reloads
// services and admission values, the example colocd.yaml, and the
// calibration presets per GPU family (calibration/*.json).
package configs
