package credfiles

// TLSFiles names PEM files for a TLS connection; it is also the tls
// section of colocd's configuration (nats.tls, nats.leaf.tls).
type TLSFiles struct {
	// CA verifies the server's certificate (default: system roots).
	CA string `mapstructure:"ca"`
	// Cert and Key are the client's certificate and key, for mutual TLS;
	// both or neither.
	Cert string `mapstructure:"cert"`
	Key  string `mapstructure:"key"`
}
