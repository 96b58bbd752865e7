// Package llm is a simulated LLM inference engine built apart from
// colocd's predictor. This first part reads the traces it replays
// (ParseTrace: Azure's LLM inference CSV, or a plain list of arrivals).
package llm
