package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/corral-dev/corral/backends"
)

// Accepted is the cron subset every refusal quotes.
const Accepted = "accepted are 5 fields (minute hour day-of-month month day-of-week), each *, n, a-b, */n, a-b/n or a comma list of those"

// field is one of the five standard cron fields and its bounds.
type field struct {
	name     string
	min, max int
	hint     string // appended to a range refusal
}

var fields = [5]field{
	{"minute", 0, 59, ""},
	{"hour", 0, 23, ""},
	{"day-of-month", 1, 31, ""},
	{"month", 1, 12, " (names such as JAN are not accepted)"},
	{"day-of-week", 0, 6, " (0 is Sunday; 7 and names such as MON are not accepted)"},
}

// parser is robfig/cron's parser for the five standard fields, with no
// descriptors. Parse has refused everything outside the portable subset
// before it is asked, so the parser only ever sees what cron(8), the
// Kubernetes CronJob controller and this package all read the same way.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// Cron is a parsed expression of the portable subset.
type Cron struct {
	expr  string
	sched cron.Schedule
}

// String returns the expression as given (fields separated by one space).
func (c Cron) String() string { return c.expr }

// Next returns the first activation strictly after t, in t's location.
func (c Cron) Next(t time.Time) time.Time { return c.sched.Next(t) }

// ParseCron parses expr, accepting only the portable subset: 5 fields,
// each *, n, a-b, */n, a-b/n or a comma list of those, with values in the
// field's range. Descriptors (@daily, @every), names (MON, JAN), ?, L, W,
// #, CRON_TZ=/TZ= prefixes and a sixth (seconds) field are refused with an
// Invalid error naming the offending field and what is accepted: an
// expression that means one thing to Kubernetes and another to the tick
// is worse than one that is not created.
//
// Day-of-month and day-of-week are OR'd when both are restricted, as in
// cron(8): "0 9 1 * 1" fires on the 1st and on every Monday. cron(8)
// counts a field starting with * (such as */2) as unrestricted, while
// Kubernetes' parser counts it as restricted; a */n day field beside a
// restricted other day field is therefore refused, with the spelled-out
// range (1-31/2) as the remedy.
func ParseCron(expr string) (Cron, error) {
	trimmed := strings.TrimSpace(expr)
	switch {
	case trimmed == "":
		return Cron{}, backends.Invalidf("a cron expression is required: %s", Accepted)
	case strings.HasPrefix(trimmed, "@"):
		return Cron{}, backends.Invalidf("cron %q: descriptors such as @daily and @every are not accepted: %s", expr, Accepted)
	case strings.HasPrefix(trimmed, "CRON_TZ=") || strings.HasPrefix(trimmed, "TZ="):
		return Cron{}, backends.Invalidf("cron %q: a CRON_TZ= or TZ= prefix is not accepted: set the schedule's time zone instead; %s", expr, Accepted)
	}
	parts := strings.Fields(trimmed)
	switch {
	case len(parts) == 6:
		return Cron{}, backends.Invalidf("cron %q has 6 fields: a seconds field is not accepted; %s", expr, Accepted)
	case len(parts) != 5:
		return Cron{}, backends.Invalidf("cron %q has %d fields: %s", expr, len(parts), Accepted)
	}
	for i, p := range parts {
		if err := checkField(fields[i], p); err != nil {
			return Cron{}, backends.Invalidf("cron %q: %s field %q: %s; %s", expr, fields[i].name, p, err.Error(), Accepted)
		}
	}
	dom, dow := parts[2], parts[4]
	for _, pair := range [][2]string{{dom, dow}, {dow, dom}} {
		if strings.HasPrefix(pair[0], "*/") && pair[1] != "*" {
			return Cron{}, backends.Invalidf("cron %q: day-of-month %q with day-of-week %q: cron(8) and Kubernetes read a */n day field beside a restricted one differently; spell the range out (1-31/2 for days of the month, 0-6/2 for days of the week)", expr, dom, dow)
		}
	}
	norm := strings.Join(parts, " ")
	s, err := parser.Parse(norm)
	if err != nil {
		// Unreachable after checkField; kept so a parser change cannot
		// let an expression through unchecked.
		return Cron{}, backends.Invalidf("cron %q does not parse: %s", expr, Accepted)
	}
	// A date that does not exist (30 2 = February 30th) never fires; the
	// parser would search five years and give up on every tick.
	if s.Next(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return Cron{}, backends.Invalidf("cron %q never fires: day-of-month %q never falls in month %q", expr, dom, parts[3])
	}
	return Cron{expr: norm, sched: s}, nil
}

// checkField checks one field against the subset and the field's range.
// Its error text is the reason, shown inside ParseCron's message.
func checkField(f field, text string) error {
	for _, c := range text {
		switch {
		case c >= '0' && c <= '9', c == '*', c == '-', c == '/', c == ',':
		case c == '?' || c == 'L' || c == 'W' || c == '#':
			return fmt.Errorf("%q is not accepted", string(c))
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			return fmt.Errorf("names are not accepted, only numbers %d-%d%s", f.min, f.max, f.hint)
		default:
			return fmt.Errorf("the character %q is not accepted", string(c))
		}
	}
	for item := range strings.SplitSeq(text, ",") {
		if err := checkItem(f, item); err != nil {
			return err
		}
	}
	return nil
}

func checkItem(f field, item string) error {
	if item == "" {
		return fmt.Errorf("an empty list item is not accepted")
	}
	rng, step, hasStep := strings.Cut(item, "/")
	if hasStep {
		n, err := number(step)
		if err != nil || n < 1 || n > f.max-f.min+1 {
			return fmt.Errorf("step %q is not accepted: a whole number 1-%d", step, f.max-f.min+1)
		}
		if rng != "*" && !strings.Contains(rng, "-") {
			return fmt.Errorf("n/step is not accepted: write */step or a-b/step")
		}
	}
	if rng == "*" {
		return nil
	}
	lo, hi, isRange := strings.Cut(rng, "-")
	a, err := f.value(lo)
	if err != nil {
		return err
	}
	if !isRange {
		return nil
	}
	b, err := f.value(hi)
	if err != nil {
		return err
	}
	if a > b {
		return fmt.Errorf("range %s-%s runs backwards: write it low-high", lo, hi)
	}
	return nil
}

// value parses one number of f and checks its range.
func (f field) value(s string) (int, error) {
	n, err := number(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number %d-%d%s", s, f.min, f.max, f.hint)
	}
	if n < f.min || n > f.max {
		return 0, fmt.Errorf("%d is out of range: accepted are %d-%d%s", n, f.min, f.max, f.hint)
	}
	return n, nil
}

func number(s string) (int, error) {
	if s == "" || len(s) > 3 {
		return 0, strconv.ErrSyntax
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.Atoi(s)
}

// LoadZone returns the location of an IANA zone name ("Europe/Berlin",
// "UTC"). An empty name, "Local" and unknown names are refused: a
// schedule's zone must mean the same on every host that evaluates it, and
// the CronJob's .spec.timeZone takes IANA names only.
func LoadZone(name string) (*time.Location, error) {
	const accepted = "accepted is an IANA time zone name such as UTC or Europe/Berlin"
	if name == "" || name == "Local" {
		return nil, backends.Invalidf("time zone %q is not accepted: %s", name, accepted)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, backends.Invalidf("time zone %q is unknown: %s", name, accepted)
	}
	return loc, nil
}
