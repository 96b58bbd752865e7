// Package observe reads what an inference server reports about itself:
// it scrapes the server's Prometheus endpoint (parsed with expfmt), picks
// the latency histogram and the request counter by a preset per server
// (vLLM, SGLang, TGI, Triton, or named ones), and turns successive scrapes
// into a windowed request rate and latency percentiles. It knows nothing of
// admission: the guard that acts on what it sees lives there.
package observe
