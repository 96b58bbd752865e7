// Package layers holds colocd's one rule of structure as a test: packages
// stand on floors (docs/architecture.md), and no package imports one on a
// floor above its own.
package layers
