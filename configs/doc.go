// Package configs holds colocd's configuration: the Config type and its
// defaults, Load (defaults, then one YAML file, then COLOCD_* environment
// variables, then flag values, each winning over the one before), Validate
// (every problem at once, each naming its key and its line in the file), the
// Watcher that hot-reloads services and admission values, and the example
// colocd.yaml. Sections that belong to an adapter are that adapter's own
// type (gpu.Config), validated by it.
package configs
