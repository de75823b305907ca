package backends

import (
	"math/big"
	"strconv"
	"strings"
)

// Size is a quantity of bytes parsed from what an operator types.
type Size int64

const (
	// MiB is one mebibyte in bytes.
	MiB Size = 1 << 20
	// maxSize bounds every size: a larger one is a typo, not a disk.
	maxSize Size = 1 << 50 // 1 PiB
)

const sizeAccepted = "accepted are a number with an optional unit M, G, T (powers of 1000), Mi, Gi, Ti or MiB, GiB, TiB (powers of 1024); a bare number is MiB, e.g. 512, 4G, 1.5Gi, 20GiB"

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first so "GiB" is not read as "B" after "Gi".
	{"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// ParseSize parses a size as spec/CONTEXT.md states: G/M (powers of 1000),
// Gi/Mi and GiB/MiB (powers of 1024); a bare number is MiB. A decimal
// fraction is accepted when the result is a whole number of bytes. Zero,
// negative, non-numeric and absurdly large sizes are Invalid errors naming
// the accepted forms.
func ParseSize(s string) (Size, error) {
	in := strings.TrimSpace(s)
	num, mult := in, int64(MiB)
	for _, u := range sizeUnits {
		if strings.HasSuffix(in, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(in, u.suffix)), u.mult
			break
		}
	}
	if num == "" || strings.ContainsAny(num, "eE/+-_ ") || strings.Count(num, ".") > 1 {
		return 0, Invalidf("size %q does not parse: %s", s, sizeAccepted)
	}
	for _, c := range num {
		if (c < '0' || c > '9') && c != '.' {
			return 0, Invalidf("size %q does not parse: %s", s, sizeAccepted)
		}
	}
	if len(num) > 30 {
		return 0, Invalidf("size %q is too large: at most 1 PiB", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, Invalidf("size %q does not parse: %s", s, sizeAccepted)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, Invalidf("size %q is not a whole number of bytes: %s", s, sizeAccepted)
	}
	n := r.Num()
	if n.Sign() <= 0 {
		return 0, Invalidf("size %q must be greater than zero: %s", s, sizeAccepted)
	}
	if n.Cmp(big.NewInt(int64(maxSize))) > 0 {
		return 0, Invalidf("size %q is too large: at most 1 PiB", s)
	}
	return Size(n.Int64()), nil
}

// MiBCeil returns the size in MiB, rounded up: a 4G (decimal) disk needs
// 3815 MiB, not 3814.
func (s Size) MiBCeil() int64 { return int64((s + MiB - 1) / MiB) }

// String formats the size the way Kubernetes quantities read, in the
// largest binary unit that divides it: 6 GiB is "6Gi", 6144.5 MiB is bytes.
func (s Size) String() string { return FormatMiB(0, s) }

// FormatMiB formats mib MiB (or, when b is non-zero, b bytes) as "6Gi",
// "512Mi", "1536Mi". It is the one formatter every surface uses for sizes.
func FormatMiB(mib int64, b Size) string {
	if b == 0 {
		b = Size(mib) * MiB
	}
	switch {
	case b == 0:
		return "0"
	case b%(1<<40) == 0:
		return strconv.FormatInt(int64(b>>40), 10) + "Ti"
	case b%(1<<30) == 0:
		return strconv.FormatInt(int64(b>>30), 10) + "Gi"
	case b%(1<<20) == 0:
		return strconv.FormatInt(int64(b>>20), 10) + "Mi"
	default:
		return strconv.FormatInt(int64(b), 10)
	}
}
