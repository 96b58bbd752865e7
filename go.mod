module github.com/colocd/colocd

go 1.26

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/spf13/cobra v1.10.2
	go.uber.org/goleak v1.3.0
	gonum.org/v1/gonum v0.17.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/tools v0.30.0 // indirect
)
