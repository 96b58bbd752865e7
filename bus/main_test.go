package bus

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test shuts down its servers and connections; nothing may linger,
// but for one goroutine of nats.go's own (natsAsyncReplyRace).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, natsAsyncReplyRace)
}

// natsAsyncReplyRace: nats.go v1.55.0's object store Put makes a JetStream
// context, publishes asynchronously and cleans the context up at once;
// jetstream.(*jetStream).newAsyncReply starts resetPendingAcksOnReconnect,
// which reads the status channel only when it runs. On a busy machine
// cleanupReplySub has set that channel to nil by then, and the goroutine
// waits on a nil channel for good. Nothing of colocd's waits on it.
var natsAsyncReplyRace = goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect")
