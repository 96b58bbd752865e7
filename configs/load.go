package configs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/colocd/colocd/field"
	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// EnvPrefix starts every environment override: key admission.lease.max is
// read from COLOCD_ADMISSION_LEASE_MAX.
const EnvPrefix = "COLOCD"

// EnvName returns the environment variable that overrides key, a dotted
// key path such as "nats.url".
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Load reads the YAML file at path over the defaults and applies the
// environment overrides; see LoadWith. It does not validate: call Validate.
func Load(path string) (*Config, error) {
	return LoadWith(path, nil)
}

// LoadWith is Load with overrides that win over everything else: the
// values of command-line flags, keyed by dotted key path ("nats.url",
// "admission.lease.max"). The precedence is overrides > environment > file
// > defaults. An empty path loads no file.
//
// Relative paths in the file (sidecar.data_dir, nats.credentials,
// nats.nkey, nats.tls.*, nats.launchers.nkey_file, nats.server_tls.*,
// nats.leaf.{nkey,credentials,tls.*}, mps.pipe_dir, mps.log_dir, mps.control when it
// contains a slash, predictor.calibration, services[].profile) are resolved
// against the file's directory; relative paths from the environment or the
// overrides are left as given, relative to the working directory.
//
// Unknown keys, in the file or the overrides, and values of the wrong type
// are reported together in a *field.List, each naming its key.
func LoadWith(path string, overrides map[string]any) (*Config, error) {
	var data []byte
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("load config: %w", err)
		}
	}
	return load(path, data, overrides)
}

// load decodes data, the content of the file at path (nil: no file).
func load(path string, data []byte, overrides map[string]any) (*Config, error) {
	file, lines, problems, err := readFile(path, data)
	if err != nil {
		return nil, err
	}
	v, flagged, unknown, err := layers(file, data != nil, overrides)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	problems = append(problems, unknown...)
	// overridden: the value came from a flag or the environment, not the file.
	overridden := func(key string) bool {
		return flagged[key] || key != "services" && os.Getenv(EnvName(key)) != ""
	}

	var c Config
	err = v.Unmarshal(&c, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		strictNumbers,
		mapstructure.StringToTimeDurationHookFunc(),
	)))
	if err != nil {
		problems = append(problems, decodeProblems(err, "", v.AllSettings())...)
	}
	for _, l := range leaves { // such a value has no line in the file
		if _, inFile := lines[l.key]; inFile && overridden(l.key) {
			lines[l.key] = 0
		}
	}
	if len(problems) > 0 {
		lines.annotate(problems)
		return nil, invalid(problems)
	}
	c.lines = lines
	if len(c.Services) == 0 {
		c.Services = nil
	}
	if len(c.NATS.Launchers.NKeys) == 0 {
		c.NATS.Launchers.NKeys = nil
	}

	if path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("load config %s: %w", path, err)
		}
		resolvePaths(&c, filepath.Dir(abs), func(key string) bool { return !overridden(key) && file.IsSet(key) })
	}
	return &c, nil
}

// readFile reads the YAML file's content (nil: no file) after checking its
// keys; a file whose keys repeat returns only its problems, since the
// decoder would refuse it with less to say.
func readFile(path string, data []byte) (file *viper.Viper, lines keyLines, problems []*field.Error, err error) {
	file = viper.New()
	file.SetConfigType("yaml")
	if data == nil {
		return file, nil, nil, nil
	}
	var dup bool
	if lines, problems, dup, err = scanYAML(data); err != nil {
		return nil, nil, nil, fmt.Errorf("load config %s: %w", path, err)
	}
	if dup {
		return nil, nil, nil, invalid(problems)
	}
	if err := file.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, nil, nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return file, lines, problems, nil
}

// layers stacks the defaults, the file (when there is one), the
// environment and the overrides, in that order of precedence. It returns
// which keys the overrides set and the overrides that name no key.
func layers(file *viper.Viper, hasFile bool, overrides map[string]any) (*viper.Viper, map[string]bool, []*field.Error, error) {
	v := viper.New()
	v.SetConfigType("yaml")
	for _, l := range leaves {
		v.SetDefault(l.key, l.val)
		if l.env {
			// BindEnv fails only without a key.
			_ = v.BindEnv(l.key, EnvName(l.key))
		}
	}
	if hasFile {
		if err := v.MergeConfigMap(file.AllSettings()); err != nil {
			return nil, nil, nil, err
		}
	}
	flagged := map[string]bool{}
	var problems []*field.Error
	for _, k := range sortedKeys(overrides) {
		lk := strings.ToLower(k)
		if !isLeaf(lk) {
			problems = append(problems, &field.Error{Path: k, Want: "a known key (docs/configuration.md)", Got: "an unknown key"})
			continue
		}
		v.Set(lk, overrides[k])
		flagged[lk] = true
	}
	return v, flagged, problems, nil
}

// resolvePaths makes the relative paths that came from the file relative
// to dir.
func resolvePaths(c *Config, dir string, fromFile func(key string) bool) {
	resolve := func(key string, p *string) {
		if *p != "" && !filepath.IsAbs(*p) && fromFile(key) {
			*p = filepath.Join(dir, *p)
		}
	}
	resolve("sidecar.data_dir", &c.Sidecar.DataDir)
	resolve("nats.credentials", &c.NATS.Credentials)
	resolve("nats.nkey", &c.NATS.NKey)
	resolve("nats.tls.ca", &c.NATS.TLS.CA)
	resolve("nats.tls.cert", &c.NATS.TLS.Cert)
	resolve("nats.tls.key", &c.NATS.TLS.Key)
	resolve("nats.launchers.nkey_file", &c.NATS.Launchers.NKeyFile)
	resolve("nats.launchers.dir", &c.NATS.Launchers.Dir)
	resolve("nats.server_tls.cert", &c.NATS.ServerTLS.Cert)
	resolve("nats.server_tls.key", &c.NATS.ServerTLS.Key)
	resolve("nats.server_tls.client_ca", &c.NATS.ServerTLS.ClientCA)
	resolve("nats.leaf.nkey", &c.NATS.Leaf.NKey)
	resolve("nats.leaf.credentials", &c.NATS.Leaf.Credentials)
	resolve("nats.leaf.tls.ca", &c.NATS.Leaf.TLS.CA)
	resolve("nats.leaf.tls.cert", &c.NATS.Leaf.TLS.Cert)
	resolve("nats.leaf.tls.key", &c.NATS.Leaf.TLS.Key)
	resolve("mps.pipe_dir", &c.MPS.PipeDir)
	resolve("mps.log_dir", &c.MPS.LogDir)
	if strings.ContainsRune(c.MPS.Control, '/') {
		resolve("mps.control", &c.MPS.Control)
	}
	resolve("predictor.calibration", &c.Predictor.Calibration)
	resolve("fleet.typical_profile", &c.Fleet.TypicalProfile)
	for i := range c.Services {
		resolve("services", &c.Services[i].Profile)
	}
}

// leaf is one key with its value in a configuration and whether an
// environment variable may override it.
type leaf struct {
	key string
	val any
	env bool
}

var (
	configType   = reflect.TypeFor[Config]()
	durationType = reflect.TypeFor[time.Duration]()
	leaves       = leafKeys(reflect.ValueOf(Default()), "")
)

// leafKeys lists the keys of a struct value with their values, depth
// first in field order. A list is one leaf, without an environment
// override (a list of records has no sensible single-variable form), and
// its value is always empty.
func leafKeys(v reflect.Value, prefix string) []leaf {
	var out []leaf
	t := v.Type()
	for i := range t.NumField() {
		if !t.Field(i).IsExported() {
			continue
		}
		key := prefix + t.Field(i).Tag.Get("mapstructure")
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Struct:
			out = append(out, leafKeys(f, key+".")...)
		case reflect.Slice:
			out = append(out, leaf{key: key, val: []any{}})
		default:
			out = append(out, leaf{key: key, val: f.Interface(), env: true})
		}
	}
	return out
}

func isLeaf(key string) bool {
	return slices.ContainsFunc(leaves, func(l leaf) bool { return l.key == key })
}

// Keys returns every dotted key path of the configuration in file order;
// services is one key (a list).
func Keys() []string {
	keys := make([]string, len(leaves))
	for i, l := range leaves {
		keys[i] = l.key
	}
	return keys
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
