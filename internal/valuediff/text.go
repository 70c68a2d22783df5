package valuediff

// OpSign is a resource step's sign, as `pulumi preview` prints it: + to
// create, - to delete, +- to replace, ~ otherwise.
func OpSign(op string) string {
	switch op {
	case "create":
		return "+"
	case "delete":
		return "-"
	case "replace":
		return "+-"
	default:
		return "~"
	}
}

// KindSign is a property change's sign in plain text: + added, - removed,
// ~ changed.
func KindSign(kind string) string {
	switch kind {
	case KindAdd:
		return "+"
	case KindDelete:
		return "-"
	default:
		return "~"
	}
}

// Describe renders the change: old => new, or the one side, and whether
// it forces the resource's replacement.
func (p Property) Describe() string {
	var s string
	switch p.Kind {
	case KindAdd:
		s = p.New
	case KindDelete:
		s = p.Old
	default:
		s = p.Old + " => " + p.New
	}
	if p.Replaces {
		s += " (forces replacement)"
	}
	return s
}
