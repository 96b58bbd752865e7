package configs

import (
	"regexp"
	"strings"
	"testing"

	"github.com/colocd/colocd/internal/testfiles"
)

// The configuration a new user copies from the tutorial and the pages on
// each inference server is valid, key for key: every yaml block loads
// (unknown keys are errors) and validates, with the files it names (a
// profile, a calibration, the data directory) replaced by ones that exist
// here.
func TestDocumentedConfigsAreValid(t *testing.T) {
	t.Parallel()
	pages := testfiles.Glob(t, "docs/servers/*.md", "docs/tutorial.md")
	profile := testfiles.Path(t, "testdata/profiles/v100-infer-200.json")
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	files := map[string]*regexp.Regexp{
		"profile":     regexp.MustCompile(`(?m)^(\s*profile:\s*)\S+`),
		"calibration": regexp.MustCompile(`(?m)^(\s*calibration:\s*)\S+`),
		"data_dir":    regexp.MustCompile(`(?m)^(\s*data_dir:\s*)\S+`),
	}
	blocks := 0
	for _, page := range pages {
		for i, m := range block.FindAllStringSubmatch(testfiles.Read(t, page), -1) {
			blocks++
			y := m[1]
			y = files["profile"].ReplaceAllString(y, "${1}"+profile)
			y = files["calibration"].ReplaceAllString(y, `${1}""`)
			y = files["data_dir"].ReplaceAllString(y, "${1}"+t.TempDir())
			if !strings.Contains(y, "services:") {
				t.Errorf("%s, yaml block %d: no services section", page, i+1)
			}
			c, err := Load(configFile(t, y))
			if err == nil {
				err = c.Validate()
			}
			if err != nil {
				t.Errorf("%s, yaml block %d: %v\n%s", page, i+1, err, m[1])
			}
		}
	}
	if blocks < 5 {
		t.Errorf("%d yaml blocks in %v, want one per server page and the tutorial's", blocks, pages)
	}
}
