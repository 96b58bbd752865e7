package predictor

import "flag"

// update rewrites golden files under testdata/ instead of comparing with them.
var update = flag.Bool("update", false, "rewrite golden files under testdata/")
