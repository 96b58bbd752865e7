package v1

import "time"

// EndpointWatch is the endpoint that makes a launcher's consumer on the
// sidecar's events stream (colocd.v1.<id>.watch). A launcher may not create
// consumers itself: a consumer's config, which no permission sees, could
// name a deliver subject inside the sidecars' account, such as the
// JetStream API (docs/security.md).
const EndpointWatch = "watch"

// WatchRequest asks for a consumer on the sidecar's events: those of one
// job (JobID) or all, from stream sequence FromSeq, or from the first event
// stored at or after Since, or (neither) from the first event kept.
type WatchRequest struct {
	JobID   string     `json:"job_id,omitempty"`
	FromSeq uint64     `json:"from_seq,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
}

// WatchReply names the consumer made: pull it with
// $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>, or, when the stream is not
// on the launcher's server, with the same call in JetStream domain Domain
// (a leaf host's own; "" when there is none).
type WatchReply struct {
	Stream   string `json:"stream"`
	Consumer string `json:"consumer"`
	Domain   string `json:"domain,omitempty"`
}

// DecodeWatchRequest decodes a watch request body, like
// [DecodeAdmitRequest]: strict, and from_seq and since exclusive.
func DecodeWatchRequest(data []byte) (*WatchRequest, error) {
	var r WatchRequest
	if err := DecodeStrict("watch request", data, &r); err != nil {
		return nil, err
	}
	if r.FromSeq > 0 && r.Since != nil {
		return nil, BadRequest("watch request: from_seq and since: want one of them, or neither")
	}
	if r.JobID != "" {
		if _, err := JobToken(r.JobID); err != nil {
			return nil, BadRequest("watch request: job_id: " + err.Error())
		}
	}
	return &r, nil
}
