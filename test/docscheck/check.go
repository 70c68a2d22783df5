package docscheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Problem is one piece of drift between a document and what it
// documents.
type Problem struct {
	// Line is the document's 1-based line.
	Line int
	// Msg says what was looked for and not found.
	Msg string
}

// Checker checks documents against the CLI and the CRDs.
type Checker struct {
	// CLI is the stackyard command tree (internal/cli.NewRootCommand).
	CLI *cobra.Command
	// CRDs are our custom resource definitions (config/crd/bases).
	CRDs []CRD
}

// Stackyard checks every `stackyard …` command line of doc, in its code
// blocks and inline code spans, against the CLI: the subcommand path must
// exist, the number of arguments must be one the command accepts (for an
// inline span, which may just mention a command, only when it gives
// some), and every flag must be one of the command's. It returns how many
// command lines it checked and what it found.
func (c *Checker) Stackyard(doc Document) (checked int, problems []Problem) {
	c.initCLI()
	for _, s := range append(append([]Snippet{}, doc.Commands...), doc.Spans...) {
		for _, words := range Commands(s.Text) {
			if !Runs(words, "stackyard") {
				continue
			}
			checked++
			for _, msg := range c.checkStackyard(words, s.Code) {
				problems = append(problems, Problem{Line: s.Line, Msg: fmt.Sprintf("`%s`: %s", strings.Join(words, " "), msg)})
			}
		}
	}
	return checked, problems
}

// initCLI adds to the command tree the help and completion commands
// cobra adds when it runs: the docs may name them too.
func (c *Checker) initCLI() {
	c.CLI.InitDefaultHelpCmd()
	c.CLI.InitDefaultCompletionCmd()
}

// checkStackyard checks one stackyard command, its words; strict is
// true in a code block, where a missing argument is an error too.
func (c *Checker) checkStackyard(words []string, strict bool) []string {
	cmd := c.CLI
	var positional, flags []string
	args := words[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			flags = append(flags, a)
			if f := lookupFlag(cmd, a); f != nil && f.NoOptDefVal == "" && !strings.Contains(a, "=") && i+1 < len(args) {
				i++ // its value
			}
			continue
		}
		if len(positional) == 0 {
			if sub := subcommand(cmd, a); sub != nil {
				cmd = sub
				continue
			}
		}
		positional = append(positional, a)
	}
	var out []string
	for _, f := range flags {
		if msg := checkFlag(cmd, f); msg != "" {
			out = append(out, msg)
		}
	}
	switch {
	case len(positional) > 0 && cmd.HasSubCommands():
		if IsPlaceholder(positional[0]) {
			break // `stackyard agent …`: a subcommand left to the reader
		}
		if !cmd.Runnable() || cmd.ValidateArgs(positional) != nil {
			out = append(out, fmt.Sprintf("%q has no subcommand %q (it has %s)", cmd.CommandPath(), positional[0], subcommandNames(cmd)))
		}
	case len(positional) > 0 || strict:
		if err := cmd.ValidateArgs(positional); err != nil {
			out = append(out, fmt.Sprintf("%q does not take the arguments %q: %v (usage: %s)", cmd.CommandPath(), positional, err, cmd.UseLine()))
		}
	}
	return out
}

// subcommand is cmd's subcommand named (or aliased) name, or nil.
func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, sub := range cmd.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// subcommandNames lists cmd's subcommands for a message.
func subcommandNames(cmd *cobra.Command) string {
	var names []string
	for _, sub := range cmd.Commands() {
		names = append(names, sub.Name())
	}
	return strings.Join(names, ", ")
}

// lookupFlag is the flag of cmd (its own, persistent or inherited) the
// flag word w names, or nil: --name, --name=value or -x. A shorthand
// with more after it (-ojson, -yq) is nil: it takes no next word.
func lookupFlag(cmd *cobra.Command, w string) *pflag.Flag {
	sets := []*pflag.FlagSet{cmd.Flags(), cmd.PersistentFlags(), cmd.InheritedFlags()}
	for _, fs := range sets {
		if name, ok := strings.CutPrefix(w, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			if f := fs.Lookup(name); f != nil {
				return f
			}
		} else if len(w) == 2 {
			if f := fs.ShorthandLookup(w[1:]); f != nil {
				return f
			}
		}
	}
	return nil
}

// checkFlag says what is wrong with the flag word w of cmd, or "".
func checkFlag(cmd *cobra.Command, w string) string {
	sets := []*pflag.FlagSet{cmd.Flags(), cmd.PersistentFlags(), cmd.InheritedFlags()}
	if name, ok := strings.CutPrefix(w, "--"); ok {
		name, _, _ = strings.Cut(name, "=")
		if name == "help" || IsPlaceholder(name) || strings.HasSuffix(name, "*") {
			return ""
		}
		for _, fs := range sets {
			if fs.Lookup(name) != nil {
				return ""
			}
		}
		return fmt.Sprintf("%q has no flag --%s (see `%s --help`)", cmd.CommandPath(), name, cmd.CommandPath())
	}
	// A group of shorthands: each must exist, up to one that takes a
	// value, which is the rest of the word.
	letters := strings.TrimPrefix(w, "-")
	for i := 0; i < len(letters); i++ {
		l := letters[i : i+1]
		if l == "=" {
			return ""
		}
		if l == "h" {
			continue
		}
		var f *pflag.Flag
		for _, fs := range sets {
			if f = fs.ShorthandLookup(l); f != nil {
				break
			}
		}
		if f == nil {
			return fmt.Sprintf("%q has no flag -%s (see `%s --help`)", cmd.CommandPath(), l, cmd.CommandPath())
		}
		if f.NoOptDefVal == "" {
			return "" // the rest is its value
		}
	}
	return ""
}

// Kubectl checks every `kubectl …` command line of doc, in its code
// blocks and inline code spans: each resource named to get, describe,
// explain, edit, patch, delete, annotate, label, wait, create, scale,
// rollout, `auth can-i` (or as TYPE/NAME to logs, port-forward, exec…)
// must be
// one of our CRDs (by any of its names), a built-in resource or a foreign
// one the docs use, a CRD named to `kubectl get crd` must be one of ours,
// and on our kinds every field a JSONPath (-o jsonpath, --for=jsonpath,
// -o custom-columns, --sort-by), `kubectl explain` or --field-selector
// names must exist in the CRD's schema (for a field selector: be one of
// its selectable fields). It returns how many command lines it checked
// and what it found.
func (c *Checker) Kubectl(doc Document) (checked int, problems []Problem) {
	for _, s := range append(append([]Snippet{}, doc.Commands...), doc.Spans...) {
		for _, words := range Commands(s.Text) {
			if !Runs(words, "kubectl") {
				continue
			}
			checked++
			for _, msg := range c.checkKubectl(words) {
				problems = append(problems, Problem{Line: s.Line, Msg: fmt.Sprintf("`%s`: %s", strings.Join(words, " "), msg)})
			}
		}
	}
	return checked, problems
}

// kubectlLine is a kubectl command line read: its verb, its positional
// arguments and its flags' values by long name.
type kubectlLine struct {
	verb       string
	positional []string
	flags      map[string][]string
}

// readKubectl reads the words after "kubectl".
func readKubectl(args []string) (kubectlLine, []string) {
	line := kubectlLine{flags: map[string][]string{}}
	var problems []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break // the command kubectl exec or run passes on
		}
		var name, value string
		hasValue := false
		switch {
		case strings.HasPrefix(a, "--"):
			name, value, hasValue = strings.Cut(a[2:], "=")
		case strings.HasPrefix(a, "-") && len(a) > 1:
			long, ok := kubectlShorthands[a[1]]
			if !ok {
				problems = append(problems, fmt.Sprintf("the kubectl flag %s is unknown to docscheck: add it to kubectlShorthands", a))
				continue
			}
			name = long
			if rest := strings.TrimPrefix(a[2:], "="); rest != "" && kubectlValueFlags[long] {
				value, hasValue = rest, true
			}
		default:
			if line.verb == "" {
				line.verb = a
			} else {
				line.positional = append(line.positional, a)
			}
			continue
		}
		switch {
		case IsPlaceholder(name):
		case kubectlValueFlags[name]:
			if !hasValue && i+1 < len(args) {
				i++
				value, hasValue = args[i], true
			}
		case kubectlBoolFlags[name], hasValue:
			// a flag with its value after "=" reads right, known or not
		default:
			problems = append(problems, fmt.Sprintf("the kubectl flag --%s is unknown to docscheck: add it to kubectlValueFlags or kubectlBoolFlags", name))
		}
		if hasValue {
			line.flags[name] = append(line.flags[name], value)
		} else {
			line.flags[name] = append(line.flags[name], "")
		}
	}
	return line, problems
}

// unknownWord reports whether w is a word the docs leave to the reader,
// which names nothing to check: a variable, a substitution or a
// placeholder.
func unknownWord(w string) bool {
	return strings.Contains(w, "$") || IsPlaceholder(w) || (w == strings.ToUpper(w) && strings.ToLower(w) != w)
}

// checkKubectl checks one kubectl command, its words.
func (c *Checker) checkKubectl(words []string) []string {
	line, out := readKubectl(words[1:])
	switch {
	case line.verb == "auth" && len(line.positional) >= 3 && line.positional[0] == "can-i":
		// kubectl auth can-i VERB RESOURCE[/NAME]: the resource, as get.
		line.verb, line.positional, line.flags = "get", line.positional[2:3], map[string][]string{}
	case line.verb == "rollout" && len(line.positional) >= 2:
		// kubectl rollout status|restart|… RESOURCE…
		line.verb, line.positional = "get", line.positional[1:]
	case podVerbs[line.verb] && len(line.positional) > 0 && strings.Contains(line.positional[0], "/"):
		// kubectl logs deploy/stackyard: a TYPE/NAME instead of a pod.
		line.verb, line.positional = "get", line.positional[:1]
	}
	if !kubectlResourceVerbs[line.verb] || len(line.positional) == 0 {
		return out
	}
	if line.flags["filename"] != nil || line.flags["kustomize"] != nil || line.verb == "apply" {
		return out // the resources are in the files
	}
	if line.verb == "create" {
		if g := line.positional[0]; !kubectlGenerators[g] && !unknownWord(g) {
			out = append(out, fmt.Sprintf("kubectl create has no subcommand %q (kubectlGenerators lists those the docs may use)", g))
		}
		return out
	}

	// The resources: "a,b NAME…" or "a/NAME b/NAME…"; explain's
	// "resource.field.path".
	var resources []string
	var names []string
	var explainPath string
	switch {
	case line.verb == "explain":
		r, p, _ := strings.Cut(line.positional[0], ".")
		resources, explainPath = []string{r}, p
	case strings.Contains(line.positional[0], "/"):
		for _, p := range line.positional {
			if r, n, ok := strings.Cut(p, "/"); ok {
				resources, names = append(resources, r), append(names, n)
			}
		}
	default:
		resources = strings.Split(line.positional[0], ",")
		names = line.positional[1:]
	}
	var kinds []CRD
	allOurs := true
	for _, r := range resources {
		if unknownWord(r) || r == "" {
			allOurs = false
			continue
		}
		var ours []CRD
		for _, crd := range c.CRDs {
			if crd.Matches(Resource(r)) {
				ours = append(ours, crd)
			}
		}
		base, _, _ := strings.Cut(strings.ToLower(r), ".")
		switch {
		case len(ours) > 0:
			kinds = append(kinds, ours...)
			continue
		case builtinResources[base]:
		case foreignResources[base] != "":
		default:
			out = append(out, fmt.Sprintf("no resource %q: not a name, short name or category of our CRDs (config/crd/bases), nor in builtinResources or foreignResources", r))
		}
		allOurs = false
		if crdResources[base] && line.verb != "explain" {
			out = append(out, c.checkCRDNames(names)...)
		}
	}
	if !allOurs || len(kinds) == 0 {
		return out
	}

	var paths []string // the fields named, for messages, as written
	var parsed [][]string
	addJSONPath := func(what, tmpl string, parse func(string) ([][]string, error)) {
		ps, err := parse(tmpl)
		if err != nil {
			out = append(out, fmt.Sprintf("%s %q: %v", what, tmpl, err))
			return
		}
		for _, p := range ps {
			paths, parsed = append(paths, what+" "+strings.Join(p, ".")), append(parsed, p)
		}
	}
	if explainPath != "" {
		if p, err := ParsePath(explainPath); err != nil {
			out = append(out, fmt.Sprintf("kubectl explain %q: %v", line.positional[0], err))
		} else {
			paths, parsed = append(paths, "kubectl explain "+explainPath), append(parsed, p)
		}
	}
	for _, o := range line.flags["output"] {
		if tmpl, ok := cutAnyPrefix(o, "jsonpath=", "jsonpath-as-json="); ok {
			addJSONPath("-o jsonpath", tmpl, JSONPathFields)
		} else if spec, ok := strings.CutPrefix(o, "custom-columns="); ok {
			addJSONPath("-o custom-columns", spec, CustomColumnsFields)
		}
	}
	for _, f := range line.flags["for"] {
		if tmpl, ok := strings.CutPrefix(f, "jsonpath="); ok {
			if end := strings.LastIndexByte(tmpl, '}'); strings.HasPrefix(tmpl, "{") && end > 0 {
				tmpl = tmpl[:end+1]
			} else {
				tmpl, _, _ = strings.Cut(tmpl, "=")
			}
			addJSONPath("--for=jsonpath", tmpl, JSONPathFields)
		}
	}
	for _, s := range line.flags["sort-by"] {
		addJSONPath("--sort-by", s, JSONPathFields)
	}
	for i, p := range parsed {
		if !slices.ContainsFunc(kinds, func(k CRD) bool { return k.HasPath(p) }) {
			out = append(out, fmt.Sprintf("%s: no such field in %s", paths[i], kindNames(kinds)))
		}
	}
	for _, sel := range line.flags["field-selector"] {
		for _, term := range strings.Split(sel, ",") {
			field := fieldSelectorField.FindString(term)
			if field == "" || field == "metadata.name" || field == "metadata.namespace" {
				continue
			}
			if !slices.ContainsFunc(kinds, func(k CRD) bool { return slices.Contains(k.Selectable, field) }) {
				out = append(out, fmt.Sprintf("--field-selector %s: not a selectable field of %s (selectableFields in config/crd/bases)", field, kindNames(kinds)))
			}
		}
	}
	return out
}

// fieldSelectorField matches the field of one term of a field selector.
var fieldSelectorField = regexp.MustCompile(`^[A-Za-z0-9_.]+`)

// checkCRDNames checks the names given to `kubectl get crd`: each must be
// one of our CRDs' (plural.group). The labels and annotations of `kubectl
// label|annotate crd NAME key=value key-` are no names.
func (c *Checker) checkCRDNames(names []string) []string {
	var out []string
	for _, n := range names {
		if unknownWord(n) || strings.Contains(n, "=") || strings.HasSuffix(n, "-") {
			continue
		}
		if !slices.ContainsFunc(c.CRDs, func(crd CRD) bool { return n == crd.Names.Plural+"."+crd.Group }) {
			out = append(out, fmt.Sprintf("no CRD %q in config/crd/bases", n))
		}
	}
	return out
}

// cutAnyPrefix is strings.CutPrefix with the first of prefixes s has.
func cutAnyPrefix(s string, prefixes ...string) (string, bool) {
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest, true
		}
	}
	return s, false
}

// kindNames lists kinds for a message.
func kindNames(kinds []CRD) string {
	var names []string
	for _, k := range kinds {
		if n := k.Names.Kind; !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, " or ")
}

// proseField matches a field path at the start of an inline code span:
// spec or status, then dotted names, indexes and elisions.
var proseField = regexp.MustCompile(`^(?:spec|status)(?:(?:\.|\.\.\.|\.?…)[a-zA-Z_][A-Za-z0-9_-]*|\[[^\]\s]*\]|\.\.\.|\.?…)+`)

// laterField matches a field path later in a span that starts with one,
// as error messages quoted in the docs name a second field.
var laterField = regexp.MustCompile(`(?:^|\s)((?:spec|status)(?:(?:\.|\.\.\.|\.?…)[a-zA-Z_][A-Za-z0-9_-]*|\[[^\]\s]*\])+)(?:$|[\s:=,;)])`)

// Fields checks every inline code span of doc that is, or starts with,
// a field path (`spec.x.y`, `status.x[].y`, optionally followed by ":",
// "=" or a space and more, as in a quoted error message, whose further
// paths are checked too): the path must exist in one of our CRDs'
// schemas, or be one of foreignFields. It returns how many paths it
// checked and what it found.
func (c *Checker) Fields(doc Document) (checked int, problems []Problem) {
	for _, s := range doc.Spans {
		m := proseField.FindString(s.Text)
		if m == "" {
			continue
		}
		rest := s.Text[len(m):]
		if rest != "" && !strings.ContainsAny(rest[:1], ": =") {
			continue // not a path: `spec.x(…)`, `status.foo/bar`
		}
		paths := []string{m}
		for _, later := range laterField.FindAllStringSubmatch(rest, -1) {
			paths = append(paths, later[1])
		}
		for _, path := range paths {
			checked++
			if msg := c.checkField(path); msg != "" {
				problems = append(problems, Problem{Line: s.Line, Msg: msg})
			}
		}
	}
	return checked, problems
}

// checkField says what is wrong with the field path written path, or "".
func (c *Checker) checkField(path string) string {
	p, err := ParsePath(path)
	if err != nil {
		return fmt.Sprintf("`%s`: %v", path, err)
	}
	if slices.ContainsFunc(c.CRDs, func(k CRD) bool { return k.HasPath(p) }) || isForeignField(p) {
		return ""
	}
	return fmt.Sprintf("`%s`: no CRD in config/crd/bases has the field %s%s, nor is it in foreignFields", path, strings.Join(p, "."), c.deepest(p))
}

// foreignFields are the fields of other kinds than ours that the docs
// name as `spec.…` or `status.…` in code, each with the kind it belongs
// to. A path below one of them is accepted too.
var foreignFields = map[string]string{
	// Flux's Kustomization (kustomize.toolkit.fluxcd.io/v1): docs/flux.md
	// and docs/concepts.md tell what its ignore rules and health-check
	// timeout do to a Stack.
	"spec.ignore":  "Flux Kustomization",
	"spec.timeout": "Flux Kustomization",
}

// isForeignField reports whether p is, or is below, one of foreignFields.
func isForeignField(p []string) bool {
	for i := len(p); i > 0; i-- {
		if foreignFields[strings.Join(p[:i], ".")] != "" {
			return true
		}
	}
	return false
}

// deepest says, for a message, the longest part of p that some CRD has.
func (c *Checker) deepest(p []string) string {
	for i := len(p) - 1; i > 1; i-- {
		var kinds []CRD
		for _, k := range c.CRDs {
			if k.HasPath(p[:i]) {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) > 0 {
			return fmt.Sprintf(" (%s exists in %s, without %s below it)", strings.Join(p[:i], "."), kindNames(kinds), p[i])
		}
	}
	return ""
}

// loneFlag matches an inline code span that is one long flag, alone or
// with a value: `--tool-dirs`, `--shard=<name>`, `--dashboard-*`.
var loneFlag = regexp.MustCompile(`^--([a-z0-9][a-z0-9-]*)(\*)?(?:[= ]\S*)?$`)

// Flags checks every inline code span of doc that is a lone long flag
// (`--name`, `--name=value`, `--prefix-*`): some stackyard command must
// have it (for a prefix, some flag starting with it), or it must be one
// of foreignFlags. It returns how many it checked and what it found.
func (c *Checker) Flags(doc Document) (checked int, problems []Problem) {
	c.initCLI()
	all := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { all[f.Name] = true })
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(c.CLI)
	for _, s := range doc.Spans {
		m := loneFlag.FindStringSubmatch(s.Text)
		if m == nil {
			continue
		}
		checked++
		name, prefix := m[1], m[2] == "*"
		if all[name] || foreignFlags[name] != "" || name == "help" {
			continue
		}
		var near []string
		for f := range all {
			if (prefix && strings.HasPrefix(f, name)) || (!prefix && (strings.HasPrefix(f, name) || strings.HasPrefix(name, f))) {
				near = append(near, "--"+f)
			}
		}
		if prefix && len(near) > 0 {
			continue
		}
		slices.Sort(near)
		msg := fmt.Sprintf("`%s`: no stackyard command has a flag --%s%s, nor is it in foreignFlags", s.Text, name, m[2])
		if len(near) > 0 {
			msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(near, " or "))
		}
		problems = append(problems, Problem{Line: s.Line, Msg: msg})
	}
	return checked, problems
}
