package observe

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/colocd/colocd/field"
)

// Endpoint is a service's metrics section in colocd's configuration: where
// its server exports metrics and how to read them.
type Endpoint struct {
	// URL is the server's metrics page, http or https.
	URL string `mapstructure:"url"`
	// Preset is vllm, sglang, tgi, triton or generic.
	Preset string `mapstructure:"preset"`
	// Interval between scrapes (0: DefaultInterval).
	Interval time.Duration `mapstructure:"interval"`
	// Window is the time the rate and percentiles cover (0: DefaultWindow),
	// at least two intervals. A shorter one reacts sooner and is noisier.
	Window time.Duration `mapstructure:"window"`
	// Histogram and Counter name the metrics of the generic preset.
	Histogram string `mapstructure:"histogram"`
	Counter   string `mapstructure:"counter"`
	// Labels pick one model's series.
	Labels map[string]string `mapstructure:"labels"`
	// Forecast is how the guard forecasts the load from what it observes.
	Forecast Forecast `mapstructure:"forecast"`
	// Steps observes an LLM engine's steps instead of its requests (the
	// preset's Steps view; generic's counter and histogram then count and
	// time steps). Set from the service, not from the file.
	Steps bool `mapstructure:"-"`
}

// Bounds of an Endpoint's values.
const (
	MinInterval = time.Second
	MaxInterval = time.Minute
	MaxWindow   = 10 * time.Minute
)

// labelName is Prometheus' rule for a label name.
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Set reports whether the section is given at all.
func (e Endpoint) Set() bool {
	return e.URL != "" || e.Preset != "" || e.Histogram != "" || e.Counter != "" || e.Interval != 0 || e.Window != 0 || len(e.Labels) > 0 ||
		e.Forecast != (Forecast{})
}

// Validate names every bad value, with keys under prefix
// ("services[0].metrics").
func (e Endpoint) Validate(prefix string) error {
	var c field.Checker
	at := func(k string) string { return prefix + "." + k }
	if u, err := url.Parse(e.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.Add(at("url"), "an http:// or https:// URL of the server's metrics page", strconv.Quote(clip(e.URL)))
	}
	switch e.Preset {
	case "generic":
		if _, err := Generic(e.Histogram, e.Counter); err != nil {
			c.Add(at("histogram"), "with preset generic, the names of a latency histogram in seconds and a request counter (histogram, counter)",
				fmt.Sprintf("%q and %q", clip(e.Histogram), clip(e.Counter)))
		}
	default:
		if _, err := PresetNamed(e.Preset); err != nil {
			c.Add(at("preset"), fmt.Sprintf("one of %v or generic", Presets()), strconv.Quote(clip(e.Preset)))
		} else if e.Histogram != "" || e.Counter != "" {
			c.Add(at("histogram"), "no histogram or counter (preset "+e.Preset+" names its own; they are for generic)", fmt.Sprintf("%q and %q", clip(e.Histogram), clip(e.Counter)))
		}
	}
	if e.Interval != 0 && (e.Interval < MinInterval || e.Interval > MaxInterval) {
		c.Add(at("interval"), fmt.Sprintf("a duration from %s to %s (0: %s)", MinInterval, MaxInterval, DefaultInterval), e.Interval.String())
	}
	interval := cmp.Or(e.Interval, DefaultInterval)
	if e.Window != 0 && (e.Window < 2*interval || e.Window > MaxWindow) {
		c.Add(at("window"), fmt.Sprintf("a duration from two intervals (%s) to %s (0: %s)", 2*interval, MaxWindow, DefaultWindow), e.Window.String())
	}
	e.Forecast.Validate(&c, at("forecast"))
	for k, v := range e.Labels {
		if !labelName.MatchString(k) || len(v) > 256 {
			c.Add(at("labels."+clip(k)), "a Prometheus label name (letters, digits, _) and a value of at most 256 bytes", strconv.Quote(clip(v)))
		}
	}
	return c.Err("metrics")
}

// Observer returns an observer of the endpoint (valid: Validate first).
func (e Endpoint) Observer(log *slog.Logger) (*Observer, error) {
	var p *Preset
	var err error
	if e.Preset == "generic" {
		p, err = Generic(e.Histogram, e.Counter)
	} else if p, err = PresetNamed(e.Preset); err == nil && e.Steps {
		if p.Steps == nil {
			return nil, fmt.Errorf("preset: want one of %v for an engine's steps, got %q", StepPresets(), e.Preset)
		}
		p = p.Steps
	}
	if err != nil {
		return nil, err
	}
	src := &Scraper{URL: e.URL, Preset: p, Labels: e.Labels}
	return NewObserver(src, Config{Interval: e.Interval, Window: e.Window, Forecast: e.Forecast, Logger: log}), nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
