// Package llm is a simulated LLM inference engine built apart from
// colocd's predictor, so that a replay against it shows the predictor's
// errors instead of restating its answers. It replays a trace of requests
// (ParseTrace: Azure's LLM inference CSV, or a plain list) through a
// discrete-event model of a vLLM-V1-like engine, times each step by an
// analytic roofline, slows the steps by a law of its own for the trainers
// next to it, and serves vLLM's Prometheus page (the same metric names,
// labels and default bucket bounds).
//
// # The engine
//
// Continuous batching, step by step. Each step has a budget of
// max_num_batched_tokens. Running requests are scheduled first, in the
// order they were admitted: a decoding request one token, a request still
// prefilling the rest of its prompt up to the budget (chunked prefill).
// Then, if no request was preempted in this step, waiting requests in
// arrival order, while the budget lasts, fewer than max_num_seqs run and
// their chunk's KV blocks are free. The KV cache has a fixed number of
// blocks of block_size tokens (from the memory left after the weights
// and a reserve, or given); a running request that needs a block when
// none is free preempts the most recently admitted running request, which
// loses its cache and goes back to the front of the waiting queue to
// compute its prompt and its tokens so far again (vLLM's recompute). A
// request's first token comes at the end of the step that computes the
// last of its prompt, each further token one step later; it finishes with
// its OutputTokens-th token. A request longer than max_model_len is
// refused and never reaches the engine, as vLLM's frontend refuses it.
//
// # The step-time law
//
// A step that schedules T tokens, reads Σkv tokens of KV cache (each
// request's computed tokens plus its new ones) and computes P query-key
// pairs (a request with c tokens computed and n new adds n·c + n(n+1)/2)
// takes, alone on the GPU,
//
//	compute_ms = (2·Params·T + 4·Layers·Hidden·P) / (PeakFLOPS·MFU)
//	memory_ms  = (WeightBytes + KVBytesPerToken·Σkv) / Bandwidth
//	step_ms    = FixedMS + max(compute_ms, memory_ms)
//
// A long prefill is compute-bound, a decode batch memory-bound. Vidur
// predicts each operator's time from tables profiled on the GPU, as a
// function of the batch's tokens and KV length; here the roofline stands
// in for such tables.
// The defaults (Default) are a Llama-2-7B-shaped fp16 model on an
// H200-class GPU: the shapes from the model's configuration, memory,
// bandwidth and peak FLOPS from NVIDIA's published specifications, and MFU
// 0.5 and FixedMS 1.5 as assumptions. None of it was measured here; the
// engine's absolute latencies are those of the roofline, not of a real
// vLLM, and no accuracy is claimed for them.
//
// # The interference law
//
// Each trainer next to the engine is four aggregates (Trainer): its MPS
// percentage Pct, its duty (the fraction of time its kernels occupy the
// GPU), its bandwidth demand while busy (a fraction of the peak) and its
// mean kernel length. colocd's predictor simulates kernel sequences with
// calibrated DRAM, L2 and slice parameters; this law shares none of that.
// For each step, with the trainers summed:
//
//   - SMs: the trainers hold Σ Duty·Pct/100 of the SMs on average, and
//     compute_ms is divided by the share left, never below MinSMShare.
//   - Head of line: each of the step's Layers·LaunchesPerLayer kernel
//     launches waits for the trainers' blocks in flight to retire: on
//     average Duty·Pct/100 · min(KernelMS, MaxKernelMS)/2 per trainer (the
//     mean residual of a kernel found running, as likely as the trainer
//     is busy, and only on the SMs it may hold). Under MPS a client's
//     kernel keeps its SMs until its blocks end, so a trainer of long
//     kernels hurts more than one of short kernels at the same duty.
//   - Bandwidth: while its kernels run the engine asks for
//     memory_ms/max(compute_ms, memory_ms) of the peak, the trainers for
//     Σ Duty·BandwidthFrac (whatever their percentage: a few SMs can draw
//     most of the bandwidth); when the sum exceeds the peak each side gets
//     a share in proportion to its demand, which lengthens memory_ms by
//     Σ Duty·BandwidthFrac · max(compute_ms, memory_ms).
//
// The step then takes FixedMS + max(compute_ms, memory_ms) + the waits
// (Config.StepCost). A trainer at Pct 0 has no effect. With the defaults (MinSMShare 0.5,
// LaunchesPerLayer 4, MaxKernelMS 5) the law is a hypothesis to test
// replays against, not a fit. Each step's time is then multiplied by a
// log-normal noise factor of mean 1 (NoiseSigma, default 0.02) from a
// generator seeded by Config.Seed, so that a run is repeatable.
//
// # What it is not
//
// No speculative decoding, prefix caching, LoRA, multi-modal inputs,
// parallel sampling, priorities, swapping to host memory, CUDA-graph
// padding, tensor or pipeline parallelism, or scheduling overlapped with
// execution; the tokenizer and the HTTP frontend cost nothing; a request
// ends after exactly its OutputTokens, counted as finished_reason "stop".
package llm
