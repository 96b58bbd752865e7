package replay

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/colocd/colocd/field"
	"github.com/colocd/colocd/observe"
)

// ParseForecast reads --forecast: comma-separated key=value pairs that
// override f's fields (alpha, beta, phi, burst, horizon), then checks
// the result as the configuration would.
func ParseForecast(s string, f observe.Forecast) (observe.Forecast, error) {
	if len(s) > 256 {
		return f, fmt.Errorf("want at most 256 bytes of key=value pairs, got %d", len(s))
	}
	for pair := range strings.SplitSeq(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return f, fmt.Errorf("%q: want key=value (alpha, beta, phi, burst, horizon)", pair)
		}
		var dst *float64
		switch strings.TrimSpace(k) {
		case "alpha":
			dst = &f.Alpha
		case "beta":
			dst = &f.Beta
		case "phi":
			dst = &f.Phi
		case "burst":
			dst = &f.Burst
		case "horizon":
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return f, fmt.Errorf("horizon: want a duration like 30s, got %q", v)
			}
			f.Horizon = d
			continue
		default:
			return f, fmt.Errorf("%q: want one of alpha, beta, phi, burst, horizon", k)
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return f, fmt.Errorf("%s: want a number, got %q", k, v)
		}
		*dst = x
	}
	var c field.Checker
	f.Validate(&c, "forecast")
	return f, c.Err("--forecast")
}
